-- Trigger api_keys_guard: a key's hash, identity, minter and expiry never change; a revoked key
-- stays revoked and its scopes stay as they were; adding a scope names who added it, at that time.
-- A key minted inactive (activated_at null, from the staff screens) is activated once, never
-- deactivated, never once revoked, and only while an approved control change naming it is due; a
-- scope is added only while an approved change naming the key and granting it is due
-- (idem_control_change_due, docs/GOVERNANCE.md): one admin cannot make their own key authenticate
-- or widen it.
CREATE OR REPLACE FUNCTION public.idem_guard_api_key_update()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF NEW.key_hash IS DISTINCT FROM OLD.key_hash
     OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
     OR NEW.key_id IS DISTINCT FROM OLD.key_id
     OR NEW.created_by IS DISTINCT FROM OLD.created_by
     OR NEW.created_at IS DISTINCT FROM OLD.created_at
     OR NEW.expires_at IS DISTINCT FROM OLD.expires_at
     OR (OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at)
     OR (OLD.revoked_at IS NOT NULL AND NEW.scopes IS DISTINCT FROM OLD.scopes)
     OR (OLD.activated_at IS NOT NULL AND NEW.activated_at IS DISTINCT FROM OLD.activated_at) THEN
    RAISE EXCEPTION 'idem: api key % cannot be changed, only revoked once', OLD.key_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF OLD.activated_at IS NULL AND NEW.activated_at IS NOT NULL
     AND (NEW.revoked_at IS NOT NULL
       OR NOT public.idem_control_change_due(NEW.tenant_id, 'api_key_create', 'keyId', NEW.key_id::text)) THEN
    RAISE EXCEPTION 'idem: api key % is activated only by an approved, due control change', OLD.key_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  -- An added scope loosens like a new key: only an approved, due change naming the key and granting
  -- at least the new list adds it.
  IF NOT (NEW.scopes <@ OLD.scopes)
     AND NOT public.idem_control_change_due(NEW.tenant_id, 'api_key_scopes', 'keyId', NEW.key_id::text,
                                            jsonb_build_object('scopes', to_jsonb(NEW.scopes))) THEN
    RAISE EXCEPTION 'idem: a scope is added to api key % only by an approved, due control change', OLD.key_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  -- Four eyes refuses the key's last widener on what it submits: a widening that does not name
  -- its widener anew would leave the earlier one answerable and the real one free.
  IF NOT (NEW.scopes <@ OLD.scopes)
     AND (NEW.widened_by IS NULL OR NEW.widened_at IS NOT DISTINCT FROM OLD.widened_at) THEN
    RAISE EXCEPTION 'idem: adding a scope to api key % must record who added it', OLD.key_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.scopes <@ OLD.scopes
     AND (NEW.widened_by IS DISTINCT FROM OLD.widened_by OR NEW.widened_at IS DISTINCT FROM OLD.widened_at) THEN
    RAISE EXCEPTION 'idem: api key % records a widener only when a scope is added', OLD.key_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $function$
