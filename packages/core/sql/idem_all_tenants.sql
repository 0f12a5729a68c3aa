-- Every tenant id, idle or not, so the reconciler also reconciles and retains idle tenants.
-- SECURITY DEFINER as idem_scheduler: the caller learns tenant ids and nothing else of tenants.
CREATE OR REPLACE FUNCTION public.idem_all_tenants()
 RETURNS TABLE(tenant_id uuid)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
  SELECT t.tenant_id FROM public.tenants t ORDER BY t.tenant_id
$function$

