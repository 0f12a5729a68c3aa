-- Trigger of every append-only table (the journal, operation history, approvals, audit log, ...):
-- UPDATE, DELETE and TRUNCATE are refused for every role, owners and superusers included (C11).
CREATE OR REPLACE FUNCTION public.idem_refuse_change()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  RAISE EXCEPTION 'idem: % is append-only; % refused', TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'integrity_constraint_violation';
END $function$

