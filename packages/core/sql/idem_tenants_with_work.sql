-- The tenants the scheduler should wake for: operations in flight or recently confirmed (within the
-- reorganisation window), due work items and webhook deliveries, and deposit addresses to watch.
-- SECURITY DEFINER as idem_scheduler: returns tenant ids only.
CREATE OR REPLACE FUNCTION public.idem_tenants_with_work(reorg_window_seconds integer)
 RETURNS TABLE(tenant_id uuid)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
  SELECT o.tenant_id FROM public.operations o
   WHERE o.state IN ('REQUESTED', 'APPROVED', 'SIGNING', 'SIGNED', 'BROADCAST', 'UNKNOWN')
      OR (o.state = 'CONFIRMED' AND o.updated_at > now() - make_interval(secs => reorg_window_seconds))
  UNION
  SELECT w.tenant_id FROM public.work_items w WHERE w.status = 'pending' AND w.available_at <= now()
  UNION
  SELECT d.tenant_id FROM public.webhook_deliveries d WHERE d.status = 'pending' AND d.available_at <= now()
  UNION
  SELECT a.tenant_id FROM public.deposit_addresses a
$function$

