-- Trigger outbound_endpoints_guard: an outbound endpoint added from the staff screens is stored
-- inactive (activated_at null) and activated once, never deactivated, never once disabled, and only
-- while an approved control change naming it is due (docs/GOVERNANCE.md): one admin cannot make
-- their own destination receive. Disabling stays open to the application (a tightening).
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
  IF OLD.activated_at IS NULL AND NEW.activated_at IS NOT NULL
     AND (NEW.disabled_at IS NOT NULL
       OR NOT EXISTS (
         SELECT 1 FROM public.proposals p
          WHERE p.tenant_id = NEW.tenant_id
            AND p.kind = 'control_change'
            AND p.state = 'APPROVED'
            AND p.effective_at <= now()
            AND p.payload -> 'change' ->> 'control' = 'webhook_endpoint_create'
            AND p.payload -> 'change' ->> 'endpointId' = NEW.endpoint_id::text)) THEN
    RAISE EXCEPTION 'idem: outbound endpoint % is activated only by an approved, due control change', OLD.endpoint_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $function$
