-- Trigger reconciliation_runs_finish_once: a reconciliation run is finished or failed exactly once,
-- and never changes after.
CREATE OR REPLACE FUNCTION public.idem_guard_reconciliation_run()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF OLD.status <> 'running' THEN
    RAISE EXCEPTION 'idem: reconciliation run % is %; a finished run never changes', OLD.run_id, OLD.status
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.status = 'running' OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id OR NEW.run_id IS DISTINCT FROM OLD.run_id
     OR NEW.ran_by IS DISTINCT FROM OLD.ran_by OR NEW.trigger IS DISTINCT FROM OLD.trigger
     OR NEW.inputs IS DISTINCT FROM OLD.inputs OR NEW.started_at IS DISTINCT FROM OLD.started_at THEN
    RAISE EXCEPTION 'idem: a reconciliation run is only ever finished or failed, once'
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $function$

