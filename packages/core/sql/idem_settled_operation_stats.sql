-- The /metrics totals of settled operations, per state: where history accumulates, so the server
-- reads it far less often than idem_operation_stats. SECURITY DEFINER as idem_metrics.
CREATE OR REPLACE FUNCTION public.idem_settled_operation_stats()
 RETURNS TABLE(state text, operations bigint)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
  SELECT o.state, count(*)::bigint
    FROM public.operations o
   WHERE o.state NOT IN ('REQUESTED','APPROVED','SIGNING','SIGNED','BROADCAST','UNKNOWN','FAILED_TERMINAL')
   GROUP BY o.state
$function$

