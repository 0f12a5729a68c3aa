-- Trigger reconciliation_run_figures_while_running: figures are added only to a running
-- reconciliation run.
CREATE OR REPLACE FUNCTION public.idem_guard_reconciliation_figure()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  PERFORM 1 FROM public.reconciliation_runs
    WHERE tenant_id = NEW.tenant_id AND run_id = NEW.run_id AND status = 'running';
  IF NOT FOUND THEN
    RAISE EXCEPTION 'idem: figures are added only to a running reconciliation run (%)', NEW.run_id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $function$

