-- Trigger staff_passkeys_guard (BEFORE UPDATE; docs/GOVERNANCE.md "Passkeys"): a staff passkey's
-- identity, owner and public key never change; its signature counter only rises; it is activated
-- once, revoked once, never activated once revoked. It is activated only while an approved, due
-- `passkey_register` control change names it and its owner (idem_control_change_due), or as the
-- tenant's trust anchor: no passkey of the tenant was ever activated, and its owner is the tenant's
-- one active admin (single-admin mode). One member cannot make their own new passkey sign
-- approvals, and neither can the application's database login alone once the anchor exists.
CREATE OR REPLACE FUNCTION public.idem_guard_passkey_update()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
     OR NEW.credential_id IS DISTINCT FROM OLD.credential_id
     OR NEW.user_id IS DISTINCT FROM OLD.user_id
     OR NEW.public_key IS DISTINCT FROM OLD.public_key
     OR NEW.label IS DISTINCT FROM OLD.label
     OR NEW.transports IS DISTINCT FROM OLD.transports
     OR NEW.created_at IS DISTINCT FROM OLD.created_at
     OR NEW.counter < OLD.counter
     OR (OLD.activated_at IS NOT NULL AND NEW.activated_at IS DISTINCT FROM OLD.activated_at)
     OR (OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at) THEN
    RAISE EXCEPTION 'idem: passkey % cannot be changed, only activated once and revoked once', OLD.credential_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF OLD.activated_at IS NULL AND NEW.activated_at IS NOT NULL
     AND (NEW.revoked_at IS NOT NULL
       OR NOT (
         public.idem_control_change_due(NEW.tenant_id, 'passkey_register', 'credentialId', NEW.credential_id,
                                        jsonb_build_object('userId', NEW.user_id::text))
         OR (NOT EXISTS (SELECT 1 FROM public.staff_passkeys k
                          WHERE k.tenant_id = NEW.tenant_id AND k.activated_at IS NOT NULL)
             AND (SELECT array_agg(s.user_id) FROM public.staff_users s
                   WHERE s.tenant_id = NEW.tenant_id AND s.role = 'admin'
                     AND s.disabled_at IS NULL AND s.password_hash <> '') = ARRAY[NEW.user_id]))) THEN
    RAISE EXCEPTION 'idem: passkey % is activated only by an approved, due control change', OLD.credential_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $function$
