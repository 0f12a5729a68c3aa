-- Webhook deliveries (issue 14): one row per notification and endpoint. The application may
-- record attempts and results, never rewrite what was sent, to whom, or for which operation, and
-- never delete the log.
ALTER TABLE webhook_deliveries FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
GRANT SELECT, INSERT ON webhook_deliveries TO idem_app;
--> statement-breakpoint
GRANT UPDATE (status, attempts, available_at, locked_by, locked_until, last_response_status, last_error,
  last_attempt_at, delivered_at, manual_redeliveries) ON webhook_deliveries TO idem_app;
--> statement-breakpoint
GRANT USAGE ON SEQUENCE webhook_deliveries_sequence_seq TO idem_app;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.idem_webhook_delivery_immutable() RETURNS trigger
  LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
  IF NEW.body IS DISTINCT FROM OLD.body OR NEW.sequence IS DISTINCT FROM OLD.sequence
     OR NEW.operation_id IS DISTINCT FROM OLD.operation_id OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
    RAISE EXCEPTION 'idem: what a webhook delivery sends is fixed when it is raised'
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$;
--> statement-breakpoint
CREATE TRIGGER webhook_deliveries_immutable BEFORE UPDATE ON webhook_deliveries
  FOR EACH ROW EXECUTE FUNCTION public.idem_webhook_delivery_immutable();
--> statement-breakpoint
-- The scheduler also wakes for tenants whose deliveries are due. It sees the three columns it
-- needs, for every tenant (its function returns tenant ids only).
GRANT SELECT (tenant_id, status, available_at) ON webhook_deliveries TO idem_scheduler;
--> statement-breakpoint
CREATE POLICY scheduler_tenants ON webhook_deliveries AS PERMISSIVE FOR SELECT TO idem_scheduler USING (true);
--> statement-breakpoint
CREATE OR REPLACE FUNCTION idem_tenants_with_work(reorg_window_seconds integer)
  RETURNS TABLE (tenant_id uuid)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
  SELECT o.tenant_id FROM public.operations o
   WHERE o.state IN ('REQUESTED', 'APPROVED', 'SIGNING', 'SIGNED', 'BROADCAST', 'UNKNOWN')
      OR (o.state = 'CONFIRMED' AND o.updated_at > now() - make_interval(secs => reorg_window_seconds))
  UNION
  SELECT w.tenant_id FROM public.work_items w WHERE w.status = 'pending' AND w.available_at <= now()
  UNION
  SELECT d.tenant_id FROM public.webhook_deliveries d WHERE d.status = 'pending' AND d.available_at <= now()
  UNION
  SELECT a.tenant_id FROM public.deposit_addresses a
$$;
