-- Which of the given operation ids exist in no tenant: reconciliation of a shared custodian account
-- tells a transfer no tenant made from one another tenant made without reading across tenants.
-- SECURITY DEFINER as idem_scheduler.
CREATE OR REPLACE FUNCTION public.idem_unknown_operation_ids(ids uuid[])
 RETURNS TABLE(operation_id uuid)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
  SELECT id FROM unnest(ids) AS id
   WHERE NOT EXISTS (SELECT 1 FROM operations o WHERE o.operation_id = id)
$function$

