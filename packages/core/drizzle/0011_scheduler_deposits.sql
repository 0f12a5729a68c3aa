-- Workers also watch the chain for tenants that have deposit addresses but no open operation.
GRANT SELECT (tenant_id) ON deposit_addresses TO idem_scheduler;
--> statement-breakpoint
CREATE POLICY scheduler_tenants ON deposit_addresses AS PERMISSIVE FOR SELECT TO idem_scheduler USING (true);
--> statement-breakpoint
CREATE OR REPLACE FUNCTION idem_tenants_with_work(reorg_window_seconds integer)
  RETURNS TABLE (tenant_id uuid)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
  SELECT o.tenant_id FROM operations o
   WHERE o.state IN ('REQUESTED', 'APPROVED', 'SIGNING', 'SIGNED', 'BROADCAST', 'UNKNOWN')
      OR (o.state = 'CONFIRMED' AND o.updated_at > now() - make_interval(secs => reorg_window_seconds))
  UNION
  SELECT w.tenant_id FROM work_items w WHERE w.status = 'pending' AND w.available_at <= now()
  UNION
  SELECT d.tenant_id FROM deposit_addresses d
$$;
