-- Trigger outbound_endpoints_guard: an outbound endpoint added from the staff screens is stored
-- inactive (activated_at null) and activated once, never deactivated, never once disabled, and only
-- while an approved control change naming it is due (idem_control_change_due, docs/GOVERNANCE.md):
-- one admin cannot make their own destination receive. Disabling stays open to the application (a
-- tightening); re-enabling is not (a disabled endpoint stays disabled: add a new one, proposed).
CREATE OR REPLACE FUNCTION public.idem_guard_outbound_endpoint_update()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF OLD.activated_at IS NOT NULL AND NEW.activated_at IS DISTINCT FROM OLD.activated_at THEN
    RAISE EXCEPTION 'idem: outbound endpoint % stays active once activated', OLD.endpoint_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF OLD.disabled_at IS NOT NULL AND NEW.disabled_at IS DISTINCT FROM OLD.disabled_at THEN
    RAISE EXCEPTION 'idem: outbound endpoint % stays disabled once disabled', OLD.endpoint_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF OLD.activated_at IS NULL AND NEW.activated_at IS NOT NULL
     AND (NEW.disabled_at IS NOT NULL
       OR NOT public.idem_control_change_due(NEW.tenant_id, 'webhook_endpoint_create', 'endpointId',
                                             NEW.endpoint_id::text)) THEN
    RAISE EXCEPTION 'idem: outbound endpoint % is activated only by an approved, due control change', OLD.endpoint_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $function$
