-- Trigger freezes_guard (docs/GOVERNANCE.md "Freeze"): a freeze in force stops the signing and
-- sending of every withdrawal under it, so whoever holds the application's login must not lift it
-- alone. Freezing is a tightening: any role inserts a freeze, in force (never one already lifted).
-- A freeze is never deleted and never changed, but lifted once: lifted_at, lifted_by and
-- lift_proposal_id set together, only as the apply step of a freeze_lift control change of the same
-- tenant that names it, is APPROVED and past its effective time (idem_control_change_due), and is the
-- proposal the row names. The deployment's own tools (the table's owner, a superuser) are not bound.
CREATE OR REPLACE FUNCTION public.idem_guard_freeze_write()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF current_user = pg_get_userbyid((SELECT relowner FROM pg_class WHERE oid = TG_RELID))
     OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
  END IF;
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'idem: freeze % is never removed; it is lifted by an approved control change', OLD.freeze_id
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF TG_OP = 'INSERT' THEN
    IF NEW.lifted_at IS NOT NULL OR NEW.lifted_by IS NOT NULL OR NEW.lift_proposal_id IS NOT NULL THEN
      RAISE EXCEPTION 'idem: a freeze is recorded in force' USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
  END IF;
  IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
     OR NEW.freeze_id IS DISTINCT FROM OLD.freeze_id
     OR NEW.scope IS DISTINCT FROM OLD.scope
     OR NEW.asset_code IS DISTINCT FROM OLD.asset_code
     OR NEW.account_ref IS DISTINCT FROM OLD.account_ref
     OR NEW.reason IS DISTINCT FROM OLD.reason
     OR NEW.frozen_by IS DISTINCT FROM OLD.frozen_by
     OR NEW.frozen_at IS DISTINCT FROM OLD.frozen_at
     OR OLD.lifted_at IS NOT NULL THEN
    RAISE EXCEPTION 'idem: freeze % cannot be changed, only lifted once', OLD.freeze_id
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF NEW.lifted_at IS NULL THEN
    RETURN NEW;
  END IF;
  IF public.idem_control_change_due(NEW.tenant_id, 'freeze_lift', 'freezeId', NEW.freeze_id::text)
     AND EXISTS (SELECT 1 FROM public.proposals p
                  WHERE p.tenant_id = NEW.tenant_id AND p.proposal_id = NEW.lift_proposal_id
                    AND p.kind = 'control_change' AND p.state = 'APPROVED' AND p.effective_at <= now()
                    AND p.payload -> 'change' ->> 'control' = 'freeze_lift'
                    AND p.payload -> 'change' ->> 'freezeId' = NEW.freeze_id::text) THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'idem: freeze % is lifted only by an approved, due control change', OLD.freeze_id
    USING ERRCODE = 'insufficient_privilege';
END $function$
