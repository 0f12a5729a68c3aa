-- The tenants where an e-mail is an active staff member, at most two: sign-in without an
-- organisation slug only needs none, one (which) or several. SECURITY DEFINER as idem_directory.
CREATE OR REPLACE FUNCTION public.idem_staff_tenants_for_email(p_email text)
 RETURNS TABLE(tenant_id uuid)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
  SELECT u.tenant_id FROM public.staff_users u
  WHERE u.email = lower(trim(p_email)) AND u.disabled_at IS NULL
  ORDER BY u.tenant_id
  LIMIT 2
$function$

