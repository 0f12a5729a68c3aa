-- Trigger risk_policies_versioned: every change of a tenant's risk policy steps the tenant's policy
-- version and writes its policy_history row, naming the actor (transaction-local app.actor; a change
-- naming no one is refused). SECURITY DEFINER: it writes what the application role may not.
CREATE OR REPLACE FUNCTION public.idem_record_policy_change()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
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
END $function$

