-- Trigger freeze_trips_guard (docs/GOVERNANCE.md "Automatic trips"): a tenant's automatic trips
-- freeze it when withdrawals fail or its hot wallets drain, so whoever holds the application's login
-- must not turn them off or loosen them alone. Any other role than the table's owner or a superuser
-- (the deployment's own tools) tightens at once: a new row, a trip turned on, a lower count, a longer
-- window, a lower share. It loosens (a trip off, a higher count, a shorter window, a higher share)
-- only as the apply step of a freeze_trip_loosen control change of the same tenant that is APPROVED,
-- past its effective time and names exactly the new row (idem_control_change_due). A row stays with
-- its tenant and asset and is never deleted (turning every trip off is the row with nulls). An
-- INSERT ... ON CONFLICT runs this for the row it proposes before it meets the existing one: that row
-- is judged against the row in force, as its UPDATE is.
CREATE OR REPLACE FUNCTION public.idem_guard_freeze_trip_write()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
  old_row record;
BEGIN
  IF current_user = pg_get_userbyid((SELECT relowner FROM pg_class WHERE oid = TG_RELID))
     OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
  END IF;
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'idem: freeze trips are never removed by the application; a trip is turned off by a control change'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF TG_OP = 'UPDATE' THEN
    IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id OR NEW.asset_code IS DISTINCT FROM OLD.asset_code THEN
      RAISE EXCEPTION 'idem: freeze trips stay with their tenant and asset'
        USING ERRCODE = 'insufficient_privilege';
    END IF;
    old_row := OLD;
  ELSE
    SELECT r.failures_max, r.failures_window_seconds, r.outflow_share_max_percent
      INTO old_row FROM public.freeze_trips r
     WHERE r.tenant_id = NEW.tenant_id AND r.asset_code IS NOT DISTINCT FROM NEW.asset_code;
    IF NOT FOUND THEN
      -- No row: every trip was off, so any row is a tightening.
      RETURN NEW;
    END IF;
  END IF;
  IF (old_row.failures_max IS NULL
      OR (NEW.failures_max IS NOT NULL AND NEW.failures_max <= old_row.failures_max
          AND NEW.failures_window_seconds >= old_row.failures_window_seconds))
     AND (old_row.outflow_share_max_percent IS NULL
      OR (NEW.outflow_share_max_percent IS NOT NULL
          AND NEW.outflow_share_max_percent <= old_row.outflow_share_max_percent)) THEN
    RETURN NEW;
  END IF;
  IF public.idem_control_change_due(NEW.tenant_id, 'freeze_trip_loosen', 'control', 'freeze_trip_loosen',
       jsonb_build_object('trip', jsonb_build_object(
         'assetCode', NEW.asset_code,
         'failuresMax', NEW.failures_max,
         'failuresWindowSeconds', NEW.failures_window_seconds,
         'outflowShareMaxPercent', NEW.outflow_share_max_percent))) THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'idem: freeze trips are loosened only by an approved, due control change'
    USING ERRCODE = 'insufficient_privilege';
END $function$
