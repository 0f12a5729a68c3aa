-- The tenant of one exact organisation slug, or nothing; it cannot list. SECURITY DEFINER as
-- idem_directory.
CREATE OR REPLACE FUNCTION public.idem_tenant_for_slug(p_slug text)
 RETURNS uuid
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
  SELECT s.tenant_id FROM public.tenant_slugs s WHERE s.slug = lower(p_slug)
$function$

