-- Trigger reconciliation_breaks_escalation_link: only a timing break of the same subject, closed as
-- escalated, may be named as a break's escalated_from.
CREATE OR REPLACE FUNCTION public.idem_check_break_escalation()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
  origin public.reconciliation_breaks%ROWTYPE;
BEGIN
  SELECT * INTO origin FROM public.reconciliation_breaks
   WHERE tenant_id = NEW.tenant_id AND break_id = NEW.escalated_from;
  IF NOT FOUND OR origin.break_class <> 'timing' OR origin.subject <> NEW.subject
     OR origin.status <> 'closed' OR origin.closed_as IS DISTINCT FROM 'escalated' THEN
    RAISE EXCEPTION 'idem: break % may escalate only a timing break of subject % closed as escalated', NEW.break_id, NEW.subject
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $function$

