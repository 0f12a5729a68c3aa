-- Deferred trigger reconciliation_breaks_escalated_has_successor: a break closed as escalated has
-- the break that escalates it by the end of the transaction.
CREATE OR REPLACE FUNCTION public.idem_check_break_escalated()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM public.reconciliation_breaks
                  WHERE tenant_id = NEW.tenant_id AND escalated_from = NEW.break_id) THEN
    RAISE EXCEPTION 'idem: break % closed as escalated without the genuine_variance break that escalates it', NEW.break_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NULL;
END $function$

