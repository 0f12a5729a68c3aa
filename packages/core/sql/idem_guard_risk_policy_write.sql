-- Trigger risk_policies_guard: an asset's risk rule decides which withdrawals the review approves
-- with no person and which need two, so whoever holds the application's login must not loosen it
-- alone. The deployment's own tools (the table's owner, a superuser: the CLI's `risk-policy set`,
-- provisioning) write rules directly. Any other role (the application's) tightens at once, and
-- loosens only as the apply step of a risk_rule control change of the same tenant that is APPROVED,
-- past its effective time and names exactly the new rule (idem_control_change_due,
-- docs/GOVERNANCE.md). Loosening is what src/governance/loosening.ts calls it: a higher auto-approve
-- limit, four-eyes threshold or velocity; also a shorter similar-withdrawal window, which no control
-- change names (its apply step keeps the window, or 60 minutes for a first rule). With no rule every
-- withdrawal needs a person, so a first rule loosens only when it auto-approves something. The
-- application never removes a rule nor moves it to another asset. An INSERT ... ON CONFLICT runs
-- this for the row it proposes before it meets the existing one: that row is judged against the
-- rule in force, as its UPDATE is.
CREATE OR REPLACE FUNCTION public.idem_guard_risk_policy_write()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
  old_rule record;
  in_force boolean;
  -- The similar-withdrawal window a control change's apply step writes: the one in force, or the
  -- column's default for a first rule (setRiskPolicy).
  window_kept integer := 60;
BEGIN
  IF current_user = pg_get_userbyid((SELECT relowner FROM pg_class WHERE oid = TG_RELID))
     OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
  END IF;
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'idem: the % risk rule is never removed by the application', OLD.asset_code
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF TG_OP = 'UPDATE' THEN
    IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id OR NEW.asset_code IS DISTINCT FROM OLD.asset_code THEN
      RAISE EXCEPTION 'idem: the % risk rule stays with its tenant and asset', OLD.asset_code
        USING ERRCODE = 'insufficient_privilege';
    END IF;
    old_rule := OLD;
    in_force := true;
  ELSE
    SELECT r.auto_approve_max_minor, r.four_eyes_min_minor, r.velocity_max_per_hour, r.similar_window_minutes
      INTO old_rule FROM public.risk_policies r
     WHERE r.tenant_id = NEW.tenant_id AND r.asset_code = NEW.asset_code;
    in_force := FOUND;
  END IF;
  IF in_force THEN
    IF NEW.auto_approve_max_minor <= old_rule.auto_approve_max_minor
       AND NEW.four_eyes_min_minor <= old_rule.four_eyes_min_minor
       AND NEW.velocity_max_per_hour <= old_rule.velocity_max_per_hour
       AND NEW.similar_window_minutes >= old_rule.similar_window_minutes THEN
      RETURN NEW;
    END IF;
    window_kept := old_rule.similar_window_minutes;
  ELSIF NEW.auto_approve_max_minor = 0 THEN
    RETURN NEW;
  END IF;
  IF NEW.similar_window_minutes >= window_kept
     AND public.idem_control_change_due(NEW.tenant_id, 'risk_rule', 'control', 'risk_rule',
           jsonb_build_object('rule', jsonb_build_object(
             'assetCode', NEW.asset_code,
             'autoApproveMaxMinor', NEW.auto_approve_max_minor::text,
             'fourEyesMinMinor', NEW.four_eyes_min_minor::text,
             'velocityMaxPerHour', NEW.velocity_max_per_hour))) THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'idem: the % risk rule is loosened only by an approved, due control change', NEW.asset_code
    USING ERRCODE = 'insufficient_privilege';
END $function$
