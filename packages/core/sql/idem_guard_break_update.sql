-- Trigger reconciliation_breaks_guard: a closed break stays closed and a break's finding never
-- changes; its evidence is part of the audit trail.
CREATE OR REPLACE FUNCTION public.idem_guard_break_update()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF OLD.status = 'closed' THEN
    RAISE EXCEPTION 'idem: reconciliation break % is closed', OLD.break_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.break_class IS DISTINCT FROM OLD.break_class OR NEW.subject IS DISTINCT FROM OLD.subject
     OR NEW.details IS DISTINCT FROM OLD.details OR NEW.opened_at IS DISTINCT FROM OLD.opened_at THEN
    RAISE EXCEPTION 'idem: a reconciliation break''s finding is immutable'
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $function$

