-- Balance-level reconciliation (issue 13): what drizzle-kit cannot emit.
-- Runs and their figures are tenant-scoped (FORCE RLS). A run is written 'running', then finished
-- (or failed) exactly once with its figures; after that nothing may change or remove it, for any
-- role. Two cross-tenant reads, each a SECURITY DEFINER function that returns only what the worker
-- needs and never a row of a tenant: every tenant id (so idle tenants are reconciled and retained
-- too), and the per-asset sum of the ledgers of the tenants that share a custodian account.
ALTER TABLE reconciliation_runs FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE reconciliation_run_figures FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
GRANT SELECT, INSERT ON reconciliation_runs, reconciliation_run_figures TO idem_app;
--> statement-breakpoint
GRANT UPDATE (status, result, breaks_opened, note, finished_at) ON reconciliation_runs TO idem_app;
--> statement-breakpoint
CREATE FUNCTION public.idem_guard_reconciliation_run() RETURNS trigger LANGUAGE plpgsql
  SET search_path = pg_catalog, public, pg_temp AS $$
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
END $$;
--> statement-breakpoint
CREATE TRIGGER reconciliation_runs_finish_once BEFORE UPDATE ON reconciliation_runs
  FOR EACH ROW EXECUTE FUNCTION public.idem_guard_reconciliation_run();
--> statement-breakpoint
CREATE TRIGGER reconciliation_runs_no_delete BEFORE DELETE ON reconciliation_runs
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
CREATE TRIGGER reconciliation_runs_no_truncate BEFORE TRUNCATE ON reconciliation_runs
  FOR EACH STATEMENT EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
CREATE FUNCTION public.idem_guard_reconciliation_figure() RETURNS trigger LANGUAGE plpgsql
  SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
  PERFORM 1 FROM public.reconciliation_runs
    WHERE tenant_id = NEW.tenant_id AND run_id = NEW.run_id AND status = 'running';
  IF NOT FOUND THEN
    RAISE EXCEPTION 'idem: figures are added only to a running reconciliation run (%)', NEW.run_id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$;
--> statement-breakpoint
CREATE TRIGGER reconciliation_run_figures_while_running BEFORE INSERT ON reconciliation_run_figures
  FOR EACH ROW EXECUTE FUNCTION public.idem_guard_reconciliation_figure();
--> statement-breakpoint
CREATE TRIGGER reconciliation_run_figures_append_only BEFORE UPDATE OR DELETE ON reconciliation_run_figures
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
CREATE TRIGGER reconciliation_run_figures_no_truncate BEFORE TRUNCATE ON reconciliation_run_figures
  FOR EACH STATEMENT EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
-- Every tenant, idle or not: the scheduler role may read tenant ids and nothing else of tenants.
GRANT SELECT (tenant_id) ON tenants TO idem_scheduler;
--> statement-breakpoint
CREATE POLICY scheduler_tenants ON tenants AS PERMISSIVE FOR SELECT TO idem_scheduler USING (true);
--> statement-breakpoint
CREATE FUNCTION public.idem_all_tenants() RETURNS TABLE (tenant_id uuid)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
  SELECT t.tenant_id FROM public.tenants t ORDER BY t.tenant_id
$$;
--> statement-breakpoint
ALTER FUNCTION public.idem_all_tenants() OWNER TO idem_scheduler;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.idem_all_tenants() FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.idem_all_tenants() TO idem_app;
--> statement-breakpoint
-- The omnibus sum. A NOLOGIN role that may read only the columns the sum needs, through policies
-- that exist for it alone; the function returns per-asset totals, never a tenant's row, and
-- refuses to run inside a tenant's scope (a request bound to one tenant has no business with it).
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'idem_reconciler') THEN
    CREATE ROLE idem_reconciler NOLOGIN NOSUPERUSER NOBYPASSRLS;
  END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;
--> statement-breakpoint
DO $$
BEGIN
  EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM idem_reconciler', current_database());
END $$;
--> statement-breakpoint
GRANT USAGE ON SCHEMA public TO idem_reconciler;
--> statement-breakpoint
GRANT SELECT (tenant_id, custodian_account) ON tenants TO idem_reconciler;
--> statement-breakpoint
GRANT SELECT (tenant_id, code, network) ON assets TO idem_reconciler;
--> statement-breakpoint
GRANT SELECT (tenant_id, asset_code, available, held) ON balances TO idem_reconciler;
--> statement-breakpoint
GRANT SELECT (tenant_id, account, asset_code, amount) ON postings TO idem_reconciler;
--> statement-breakpoint
CREATE POLICY reconciler_sum ON tenants AS PERMISSIVE FOR SELECT TO idem_reconciler USING (true);
--> statement-breakpoint
CREATE POLICY reconciler_sum ON assets AS PERMISSIVE FOR SELECT TO idem_reconciler USING (true);
--> statement-breakpoint
CREATE POLICY reconciler_sum ON balances AS PERMISSIVE FOR SELECT TO idem_reconciler USING (true);
--> statement-breakpoint
CREATE POLICY reconciler_sum ON postings AS PERMISSIVE FOR SELECT TO idem_reconciler USING (true);
--> statement-breakpoint
CREATE FUNCTION public.idem_custodian_account_ledger(account_name text, custodian_networks text[])
  RETURNS TABLE (asset_code text, available numeric, held numeric, custody_control numeric, tenants integer)
  LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
  IF nullif(current_setting('app.tenant_id', true), '') IS NOT NULL THEN
    RAISE EXCEPTION 'idem: the custodian account sum is read outside any tenant''s scope'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN QUERY
  WITH members AS (
    SELECT t.tenant_id FROM public.tenants t WHERE t.custodian_account = account_name
  ), held_assets AS (
    SELECT a.tenant_id, a.code FROM public.assets a
     WHERE a.tenant_id IN (SELECT m.tenant_id FROM members m) AND a.network = ANY (custodian_networks)
  ), liabilities AS (
    SELECT b.asset_code AS code, sum(b.available) AS available, sum(b.held) AS held
      FROM public.balances b JOIN held_assets h ON h.tenant_id = b.tenant_id AND h.code = b.asset_code
     GROUP BY b.asset_code
  ), custody AS (
    SELECT p.asset_code AS code, -sum(p.amount) AS control
      FROM public.postings p JOIN held_assets h ON h.tenant_id = p.tenant_id AND h.code = p.asset_code
     WHERE p.account = '@custody'
     GROUP BY p.asset_code
  )
  SELECT c.code, coalesce(l.available, 0), coalesce(l.held, 0), coalesce(cu.control, 0),
         (SELECT count(*)::integer FROM members)
    FROM (SELECT DISTINCT h.code FROM held_assets h) c
    LEFT JOIN liabilities l ON l.code = c.code
    LEFT JOIN custody cu ON cu.code = c.code
   ORDER BY c.code;
END $$;
--> statement-breakpoint
ALTER FUNCTION public.idem_custodian_account_ledger(text, text[]) OWNER TO idem_reconciler;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.idem_custodian_account_ledger(text, text[]) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.idem_custodian_account_ledger(text, text[]) TO idem_app;
