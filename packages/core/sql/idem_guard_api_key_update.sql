-- Trigger api_keys_guard: a key's hash and identity never change, and a revoked key stays revoked.
CREATE OR REPLACE FUNCTION public.idem_guard_api_key_update()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF NEW.key_hash IS DISTINCT FROM OLD.key_hash
     OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
     OR NEW.key_id IS DISTINCT FROM OLD.key_id
     OR (OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at) THEN
    RAISE EXCEPTION 'idem: api key % cannot be changed, only revoked once', OLD.key_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $function$

