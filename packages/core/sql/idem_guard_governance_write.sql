-- Trigger tenant_governance_guard: the governance settings decide how hard every other control is
-- to loosen. The deployment's own tools (the table's owner, a superuser) set them directly; any other
-- role (the application's) writes them only as the apply step of a governance control change of the
-- same tenant that is APPROVED and past its effective time, and only the values it proposed (every
-- other column as it was, or its default for a first row). Requiring passkeys for approvals
-- (require_passkey_approvals) only tightens when turned on, which any write may do; it is turned
-- off only while an approved, due governance change asking for exactly that names the tenant.
CREATE OR REPLACE FUNCTION public.idem_guard_governance_write()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
  ttl integer := 259200;
  quorum integer := 2;
  delay integer := 86400;
  single boolean := false;
  passkeys boolean := false;
BEGIN
  IF current_user = pg_get_userbyid((SELECT relowner FROM pg_class WHERE oid = TG_RELID))
     OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    RETURN NEW;
  END IF;
  IF TG_OP = 'UPDATE' THEN
    IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id THEN
      RAISE EXCEPTION 'idem: governance settings stay with their tenant' USING ERRCODE = 'insufficient_privilege';
    END IF;
    ttl := OLD.proposal_ttl_seconds;
    quorum := OLD.admin_quorum;
    delay := OLD.loosening_delay_seconds;
    single := OLD.single_admin;
    passkeys := OLD.require_passkey_approvals;
  END IF;
  -- Single-admin mode only restricts (the CLI chooses it at creation): entering it is allowed,
  -- leaving it is not.
  IF NEW.single_admin = false AND single = true THEN
    RAISE EXCEPTION 'idem: tenant % stays in single-admin mode', NEW.tenant_id
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF NEW.require_passkey_approvals = false AND passkeys = true
     AND NOT public.idem_control_change_due(NEW.tenant_id, 'governance', 'control', 'governance',
                                            '{"settings": {"requirePasskeyApprovals": false}}'::jsonb) THEN
    RAISE EXCEPTION 'idem: tenant % stops requiring passkeys only through an approved control change', NEW.tenant_id
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF NEW.proposal_ttl_seconds = ttl AND NEW.admin_quorum = quorum AND NEW.loosening_delay_seconds = delay THEN
    RETURN NEW;
  END IF;
  IF NOT EXISTS (
    SELECT 1 FROM proposals p
     WHERE p.tenant_id = NEW.tenant_id
       AND p.kind = 'control_change'
       AND p.state = 'APPROVED'
       AND p.effective_at <= now()
       AND p.payload->'change'->>'control' = 'governance'
       AND NEW.proposal_ttl_seconds = coalesce((p.payload->'change'->'settings'->>'proposalTtlSeconds')::int, ttl)
       AND NEW.admin_quorum = coalesce((p.payload->'change'->'settings'->>'adminQuorum')::int, quorum)
       AND NEW.loosening_delay_seconds = coalesce((p.payload->'change'->'settings'->>'looseningDelaySeconds')::int, delay)
  ) THEN
    RAISE EXCEPTION 'idem: tenant % governance settings change only through an approved control change', NEW.tenant_id
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END $function$
