-- Trigger operations_guard_provider_tx_hash: the transaction hash a custodian reports is recorded
-- once; a later, different report is a reconciliation question, not an overwrite.
CREATE OR REPLACE FUNCTION public.idem_guard_operation_provider_tx_hash()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF OLD.provider_tx_hash IS NOT NULL AND NEW.provider_tx_hash IS DISTINCT FROM OLD.provider_tx_hash THEN
    RAISE EXCEPTION 'idem: operation % custodian transaction hash is final', OLD.operation_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $function$

