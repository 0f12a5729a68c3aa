-- The /metrics aggregate per scrape reads only the operations still in flight, through the partial
-- index operations_in_flight (0048): its cost follows the work in progress, not the history. The
-- settled states' totals (where history accumulates) move to their own aggregate-only function,
-- which the server reads at most once per a much longer interval (IDEM_METRICS_SETTLED_CACHE_MS).
-- Both keep 0003's contract: owned by idem_metrics, aggregates only, callable by idem_app.
CREATE OR REPLACE FUNCTION public.idem_operation_stats()
  RETURNS TABLE (state text, operations bigint, oldest_seconds double precision)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
  SELECT o.state, count(*)::bigint, extract(epoch FROM now() - min(o.updated_at))::double precision
    FROM public.operations o
   WHERE o.state IN ('REQUESTED','APPROVED','SIGNING','SIGNED','BROADCAST','UNKNOWN','FAILED_TERMINAL')
   GROUP BY o.state
$$;
--> statement-breakpoint
CREATE FUNCTION public.idem_settled_operation_stats()
  RETURNS TABLE (state text, operations bigint)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
  SELECT o.state, count(*)::bigint
    FROM public.operations o
   WHERE o.state NOT IN ('REQUESTED','APPROVED','SIGNING','SIGNED','BROADCAST','UNKNOWN','FAILED_TERMINAL')
   GROUP BY o.state
$$;
--> statement-breakpoint
ALTER FUNCTION public.idem_settled_operation_stats() OWNER TO idem_metrics;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.idem_settled_operation_stats() FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.idem_settled_operation_stats() TO idem_app;
