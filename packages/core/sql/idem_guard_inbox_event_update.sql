-- Trigger inbox_events_guard: an inbox event is evidence of what arrived, from whom, with which
-- body (C18); only its processing status and delivery count move.
CREATE OR REPLACE FUNCTION public.idem_guard_inbox_event_update()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
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
END $function$

