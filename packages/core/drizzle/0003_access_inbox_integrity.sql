-- What drizzle-kit cannot emit for the access and inbox tables (see 0001 for the pattern):
-- FORCE ROW LEVEL SECURITY, narrow grants to idem_app, immutability triggers, and one
-- aggregate-only function for metrics.
ALTER TABLE api_keys FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE webhook_endpoints FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE inbox_events FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE inbox_quarantine FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE inbox_rejections FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
-- Keys and endpoints can be created and retired by the application, never edited or deleted.
GRANT SELECT, INSERT ON api_keys, webhook_endpoints TO idem_app;
--> statement-breakpoint
GRANT UPDATE (revoked_at) ON api_keys TO idem_app;
--> statement-breakpoint
GRANT UPDATE (disabled_at) ON webhook_endpoints TO idem_app;
--> statement-breakpoint
GRANT SELECT, INSERT, UPDATE ON inbox_events TO idem_app;
--> statement-breakpoint
GRANT SELECT, INSERT ON inbox_quarantine, inbox_rejections TO idem_app;
--> statement-breakpoint
GRANT UPDATE (resolved_at, resolved_by) ON inbox_quarantine TO idem_app;
--> statement-breakpoint

-- An inbox event is evidence: what arrived, from whom, with which body, stays as it arrived (C18).
-- Only its processing status and delivery count move.
CREATE FUNCTION idem_guard_inbox_event_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
     OR NEW.source IS DISTINCT FROM OLD.source
     OR NEW.event_id IS DISTINCT FROM OLD.event_id
     OR NEW.endpoint_id IS DISTINCT FROM OLD.endpoint_id
     OR NEW.event_type IS DISTINCT FROM OLD.event_type
     OR NEW.body_sha256 IS DISTINCT FROM OLD.body_sha256
     OR NEW.body IS DISTINCT FROM OLD.body
     OR NEW.received_at IS DISTINCT FROM OLD.received_at THEN
    RAISE EXCEPTION 'idem: inbox event %/% is immutable evidence', OLD.source, OLD.event_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $$;
--> statement-breakpoint
CREATE TRIGGER inbox_events_guard BEFORE UPDATE ON inbox_events
  FOR EACH ROW EXECUTE FUNCTION idem_guard_inbox_event_update();
--> statement-breakpoint
CREATE TRIGGER inbox_events_no_delete BEFORE DELETE ON inbox_events
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
CREATE TRIGGER inbox_quarantine_no_delete BEFORE DELETE ON inbox_quarantine
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
CREATE TRIGGER inbox_rejections_append_only BEFORE UPDATE OR DELETE ON inbox_rejections
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
-- A revoked key stays revoked, and a key's hash never changes.
CREATE FUNCTION idem_guard_api_key_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.key_hash IS DISTINCT FROM OLD.key_hash
     OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
     OR NEW.key_id IS DISTINCT FROM OLD.key_id
     OR (OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at) THEN
    RAISE EXCEPTION 'idem: api key % cannot be changed, only revoked once', OLD.key_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $$;
--> statement-breakpoint
CREATE TRIGGER api_keys_guard BEFORE UPDATE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION idem_guard_api_key_update();
--> statement-breakpoint

-- Metrics need counts across tenants, which row-level security rightly hides from idem_app. A
-- NOLOGIN role that may read operations, owning one SECURITY DEFINER function that returns only
-- aggregates (no tenant, no row), keeps the application role unable to read across tenants.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'idem_metrics') THEN
    CREATE ROLE idem_metrics NOLOGIN NOSUPERUSER NOBYPASSRLS;
  END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;
--> statement-breakpoint
GRANT USAGE ON SCHEMA public TO idem_metrics;
--> statement-breakpoint
GRANT SELECT (state, updated_at) ON operations TO idem_metrics;
--> statement-breakpoint
CREATE POLICY metrics_aggregate ON operations AS PERMISSIVE FOR SELECT TO idem_metrics USING (true);
--> statement-breakpoint
CREATE FUNCTION idem_operation_stats()
  RETURNS TABLE (state text, operations bigint, oldest_seconds double precision)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
  SELECT o.state, count(*)::bigint, extract(epoch FROM now() - min(o.updated_at))::double precision
    FROM operations o GROUP BY o.state
$$;
--> statement-breakpoint
ALTER FUNCTION idem_operation_stats() OWNER TO idem_metrics;
--> statement-breakpoint
REVOKE ALL ON FUNCTION idem_operation_stats() FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION idem_operation_stats() TO idem_app;
