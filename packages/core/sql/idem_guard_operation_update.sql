-- Trigger operations_guard: an operation's identity and approved payload never change (C02), the
-- signed bytes and transaction hash are written once (C12), the version grows by one with every
-- change, the lease generation never goes back, and a key may only expire, into its digest, once
-- the operation is settled (C07).
CREATE OR REPLACE FUNCTION public.idem_guard_operation_update()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
     OR NEW.operation_id IS DISTINCT FROM OLD.operation_id
     OR NEW.kind IS DISTINCT FROM OLD.kind
     OR NEW.reference IS DISTINCT FROM OLD.reference
     OR NEW.account_ref IS DISTINCT FROM OLD.account_ref
     OR NEW.asset_code IS DISTINCT FROM OLD.asset_code
     OR NEW.network IS DISTINCT FROM OLD.network
     OR NEW.destination IS DISTINCT FROM OLD.destination
     OR NEW.memo IS DISTINCT FROM OLD.memo
     OR NEW.amount_minor IS DISTINCT FROM OLD.amount_minor
     OR NEW.fee_cap_minor IS DISTINCT FROM OLD.fee_cap_minor
     OR NEW.policy_version IS DISTINCT FROM OLD.policy_version
     OR NEW.payload_hash IS DISTINCT FROM OLD.payload_hash
     OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
    RAISE EXCEPTION 'idem: operation % identity and approved payload are immutable', OLD.operation_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key THEN
    IF OLD.state NOT IN ('REJECTED', 'CONFIRMED', 'VERIFIED_NOT_SENT')
       OR OLD.settled_at IS NULL
       OR OLD.key_expired_at IS NOT NULL
       OR NEW.idempotency_key <> 'expired:' || encode(sha256(convert_to(OLD.idempotency_key, 'UTF8')), 'hex') THEN
      RAISE EXCEPTION 'idem: the key of operation % cannot change (only a settled operation''s key may expire)', OLD.operation_id
        USING ERRCODE = 'integrity_constraint_violation';
    END IF;
  END IF;
  IF OLD.signed_artifact IS NOT NULL AND NEW.signed_artifact IS DISTINCT FROM OLD.signed_artifact THEN
    RAISE EXCEPTION 'idem: operation % is already signed; the stored bytes are final', OLD.operation_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF OLD.tx_hash IS NOT NULL AND NEW.tx_hash IS DISTINCT FROM OLD.tx_hash THEN
    RAISE EXCEPTION 'idem: operation % transaction hash is final', OLD.operation_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.version <> OLD.version + 1 THEN
    RAISE EXCEPTION 'idem: operation % update must advance version by one', OLD.operation_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.lease_generation < OLD.lease_generation THEN
    RAISE EXCEPTION 'idem: operation % lease generation cannot go back', OLD.operation_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $function$

