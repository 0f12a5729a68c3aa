-- Trigger staff_users_approvals_from: a member who accepts an invitation (their first password) or
-- whose role changes may approve only after the tenant's cooling-off period, whatever path wrote
-- the change. The application role has no grant on approvals_from, so nothing else shortens it.
CREATE OR REPLACE FUNCTION public.idem_staff_approvals_from()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
  cooling integer;
BEGIN
  IF NEW.role IS DISTINCT FROM OLD.role OR (OLD.password_hash = '' AND NEW.password_hash <> '') THEN
    SELECT t.approver_cooling_off_seconds INTO cooling FROM public.tenants t WHERE t.tenant_id = NEW.tenant_id;
    -- A tenant row this role cannot see gets the default period, never none.
    NEW.approvals_from := now() + make_interval(secs => coalesce(cooling, 86400));
  END IF;
  RETURN NEW;
END $function$
