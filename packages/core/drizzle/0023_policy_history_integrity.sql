-- A tenant's policy version (hashed into every payload, C02) moves with its risk and approval
-- rules, and only with them (issue 11, finding 6). The database does it itself, whoever writes:
-- every real change of a `risk_policies` row bumps `tenants.policy_version` by one in the same
-- transaction and appends a `policy_history` row (who, when, version from -> to, the rules before
-- and after). The tenant row's lock serialises concurrent changes, so each gets its own version.
-- The application role may read the history but neither write it nor move the version by hand.
ALTER TABLE policy_history FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
GRANT SELECT ON policy_history TO idem_app;
--> statement-breakpoint
CREATE TRIGGER policy_history_append_only BEFORE UPDATE OR DELETE ON policy_history
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
CREATE TRIGGER policy_history_no_truncate BEFORE TRUNCATE ON policy_history
  FOR EACH STATEMENT EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
-- TRUNCATE would drop rules without a record of it; DELETE goes through the trigger below.
CREATE TRIGGER risk_policies_no_truncate BEFORE TRUNCATE ON risk_policies
  FOR EACH STATEMENT EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint

-- SECURITY DEFINER: it writes what the application role may not (the version, the history). The
-- tenant is the changed row's own, which row-level security already bound to the caller's scope.
-- The actor is the transaction-local `app.actor` (set by setRiskPolicy); a change naming no one is
-- refused. A rewrite that leaves every rule as it was (only updated_at moved) is no change.
CREATE OR REPLACE FUNCTION idem_record_policy_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
  v_actor text := nullif(pg_catalog.current_setting('app.actor', true), '');
  v_tenant uuid;
  v_asset text;
  v_before jsonb;
  v_after jsonb;
  v_version integer;
BEGIN
  -- Attached anywhere else (say, to a caller's own table) it would forge versions: refuse.
  IF TG_TABLE_SCHEMA <> 'public' OR TG_TABLE_NAME <> 'risk_policies' THEN
    RAISE EXCEPTION 'idem: idem_record_policy_change only versions public.risk_policies'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    v_tenant := OLD.tenant_id;
    v_asset := OLD.asset_code;
    -- Numbers as decimal strings: amounts exceed what a JSON reader's doubles hold exactly.
    SELECT pg_catalog.jsonb_object_agg(key, CASE pg_catalog.jsonb_typeof(value)
             WHEN 'number' THEN pg_catalog.to_jsonb(value #>> '{}') ELSE value END)
      INTO v_before
      FROM pg_catalog.jsonb_each(pg_catalog.to_jsonb(OLD) - 'tenant_id' - 'updated_at');
  END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') THEN
    v_tenant := NEW.tenant_id;
    v_asset := NEW.asset_code;
    SELECT pg_catalog.jsonb_object_agg(key, CASE pg_catalog.jsonb_typeof(value)
             WHEN 'number' THEN pg_catalog.to_jsonb(value #>> '{}') ELSE value END)
      INTO v_after
      FROM pg_catalog.jsonb_each(pg_catalog.to_jsonb(NEW) - 'tenant_id' - 'updated_at');
  END IF;
  IF TG_OP = 'UPDATE' AND v_before = v_after AND OLD.tenant_id = NEW.tenant_id THEN
    RETURN NULL;
  END IF;
  IF v_actor IS NULL THEN
    RAISE EXCEPTION 'idem: a change of risk_policies must name its actor (app.actor)'
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  -- The conditional step: the row lock makes a concurrent change wait, then see this version.
  UPDATE public.tenants SET policy_version = policy_version + 1
   WHERE tenant_id = v_tenant
  RETURNING policy_version INTO v_version;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'idem: tenant % not found for a policy change', v_tenant
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  INSERT INTO public.policy_history (tenant_id, from_version, to_version, policy, asset_code, before, after, actor)
  VALUES (v_tenant, v_version - 1, v_version, 'risk', v_asset, v_before, v_after, v_actor);
  RETURN NULL;
END $$;
--> statement-breakpoint
-- Only its owner may attach it to a table (CREATE TRIGGER needs EXECUTE; firing does not).
REVOKE ALL ON FUNCTION idem_record_policy_change() FROM PUBLIC;
--> statement-breakpoint
CREATE TRIGGER risk_policies_versioned AFTER INSERT OR UPDATE OR DELETE ON risk_policies
  FOR EACH ROW EXECUTE FUNCTION idem_record_policy_change();
--> statement-breakpoint

-- The version itself: one step forward at a time, and only with its history row (checked at
-- commit, since the trigger above writes the row after the step).
CREATE OR REPLACE FUNCTION idem_guard_policy_version() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
  IF NEW.policy_version IS DISTINCT FROM OLD.policy_version
     AND NEW.policy_version IS DISTINCT FROM OLD.policy_version + 1 THEN
    RAISE EXCEPTION 'idem: a tenant''s policy version only moves one step forward (% to % refused)',
      OLD.policy_version, NEW.policy_version USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $$;
--> statement-breakpoint
CREATE TRIGGER tenants_policy_version_step BEFORE UPDATE OF policy_version ON tenants
  FOR EACH ROW EXECUTE FUNCTION idem_guard_policy_version();
--> statement-breakpoint
CREATE OR REPLACE FUNCTION idem_check_policy_version_recorded() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
  IF NEW.policy_version IS DISTINCT FROM OLD.policy_version AND NOT EXISTS (
       SELECT 1 FROM public.policy_history
        WHERE tenant_id = NEW.tenant_id AND to_version = NEW.policy_version) THEN
    RAISE EXCEPTION 'idem: policy version % of tenant % has no policy_history row', NEW.policy_version, NEW.tenant_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER tenants_policy_version_recorded AFTER UPDATE OF policy_version ON tenants
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION idem_check_policy_version_recorded();
