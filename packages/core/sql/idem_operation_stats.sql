-- The /metrics aggregate of operations still in flight, per state, with the oldest one's age; read
-- through the partial index operations_in_flight, so its cost follows work in progress, not history.
-- SECURITY DEFINER as idem_metrics: aggregates only, never a row.
CREATE OR REPLACE FUNCTION public.idem_operation_stats()
 RETURNS TABLE(state text, operations bigint, oldest_seconds double precision)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
  SELECT o.state, count(*)::bigint, extract(epoch FROM now() - min(o.updated_at))::double precision
    FROM public.operations o
   WHERE o.state IN ('REQUESTED','APPROVED','SIGNING','SIGNED','BROADCAST','UNKNOWN','FAILED_TERMINAL')
   GROUP BY o.state
$function$

