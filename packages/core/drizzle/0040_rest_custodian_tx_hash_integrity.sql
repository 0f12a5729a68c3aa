-- The hash a custodian reports for our transfer is recorded once, like the transfer id itself
-- (provider_ref, migration 0005): a later, different report is a reconciliation question, not an
-- overwrite of what an integrator was already told.
CREATE OR REPLACE FUNCTION idem_guard_operation_provider_tx_hash() RETURNS trigger
  LANGUAGE plpgsql
  SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
  IF OLD.provider_tx_hash IS NOT NULL AND NEW.provider_tx_hash IS DISTINCT FROM OLD.provider_tx_hash THEN
    RAISE EXCEPTION 'idem: operation % custodian transaction hash is final', OLD.operation_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $$;
--> statement-breakpoint
CREATE TRIGGER operations_guard_provider_tx_hash BEFORE UPDATE OF provider_tx_hash ON operations
  FOR EACH ROW EXECUTE FUNCTION idem_guard_operation_provider_tx_hash();
