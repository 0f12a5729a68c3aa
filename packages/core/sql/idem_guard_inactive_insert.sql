-- Triggers api_keys_insert_guard and outbound_endpoints_insert_guard: a new API key or outbound
-- endpoint that is active at once (activated_at set, the column's default) is stored only by the
-- deployment's own tools, the table's owner or a superuser (the CLI's `apikey create`,
-- `outbound-endpoint create`, `tenant create`). Any other role (the application's, whatever its code
-- path and whatever the tenant's mode) stores them inactive, and only an approved, due control
-- change activates them (idem_guard_api_key_update, idem_guard_outbound_endpoint_update;
-- docs/GOVERNANCE.md): no admin makes a key or an endpoint live alone.
CREATE OR REPLACE FUNCTION public.idem_guard_inactive_insert()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF NEW.activated_at IS NULL
     OR current_user = pg_get_userbyid((SELECT relowner FROM pg_class WHERE oid = TG_RELID))
     OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'idem: % rows are stored inactive; an approved, due control change activates them', TG_TABLE_NAME
    USING ERRCODE = 'insufficient_privilege';
END $function$
