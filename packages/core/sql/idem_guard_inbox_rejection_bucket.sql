-- Trigger inbox_rejection_buckets_count_only: a bucket counts the refusals of one minute. It starts
-- at one and grows by one; its key and first sighting never change, its last sighting and largest
-- body only move forward.
CREATE OR REPLACE FUNCTION public.idem_guard_inbox_rejection_bucket()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
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
END $function$

