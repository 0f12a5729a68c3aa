-- What drizzle-kit cannot emit for inbox_rejection_buckets (I11-F9; see 0003 for the pattern):
-- FORCE ROW LEVEL SECURITY, narrow grants, and a trigger that lets a bucket only count up.
ALTER TABLE inbox_rejection_buckets FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
GRANT SELECT, INSERT ON inbox_rejection_buckets TO idem_app;
--> statement-breakpoint
GRANT UPDATE (rejections, last_seen_at, body_length_max) ON inbox_rejection_buckets TO idem_app;
--> statement-breakpoint
-- The per-delivery table grew with every forged post; it is kept as evidence and written no more.
REVOKE INSERT ON inbox_rejections FROM idem_app;
--> statement-breakpoint

-- A bucket is evidence of how many refusals arrived in a minute: it starts at one and moves by one
-- refusal at a time. Its key and first sighting never change, its last sighting and largest body
-- only move forward, and it is never deleted.
CREATE OR REPLACE FUNCTION idem_guard_inbox_rejection_bucket() RETURNS trigger
  LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    IF NEW.rejections <> 1 THEN
      RAISE EXCEPTION 'idem: a rejection bucket starts at one rejection'
        USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
  END IF;
  IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
     OR NEW.endpoint_id IS DISTINCT FROM OLD.endpoint_id
     OR NEW.reason IS DISTINCT FROM OLD.reason
     OR NEW.bucket_start IS DISTINCT FROM OLD.bucket_start
     OR NEW.first_seen_at IS DISTINCT FROM OLD.first_seen_at
     OR NEW.rejections IS DISTINCT FROM OLD.rejections + 1
     OR NEW.last_seen_at < OLD.last_seen_at
     OR NEW.body_length_max < OLD.body_length_max THEN
    RAISE EXCEPTION 'idem: rejection bucket %/% only counts up, by one', OLD.endpoint_id, OLD.bucket_start
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $$;
--> statement-breakpoint
DROP TRIGGER IF EXISTS inbox_rejection_buckets_count_only ON inbox_rejection_buckets;
--> statement-breakpoint
CREATE TRIGGER inbox_rejection_buckets_count_only BEFORE INSERT OR UPDATE ON inbox_rejection_buckets
  FOR EACH ROW EXECUTE FUNCTION idem_guard_inbox_rejection_bucket();
--> statement-breakpoint
DROP TRIGGER IF EXISTS inbox_rejection_buckets_no_delete ON inbox_rejection_buckets;
--> statement-breakpoint
CREATE TRIGGER inbox_rejection_buckets_no_delete BEFORE DELETE ON inbox_rejection_buckets
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
