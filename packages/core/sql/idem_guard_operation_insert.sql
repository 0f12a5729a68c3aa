-- Trigger operations_guard_insert: a new operation starts where its kind's own creation
-- path starts it, with nothing a later step writes. A withdrawal is REQUESTED (idem_create_withdrawal,
-- idem_create_withdrawals; a refused hold then moves it to REJECTED), unreviewed, with no lease,
-- signature, nonce, custodian reference or owner; a deposit or an adjustment is recorded CONFIRMED
-- (recordDeposit, recordAdjustment), its credit guarded by idem_check_entry_source. So whoever holds
-- the application's login cannot write a withdrawal that is already APPROVED or signed. The
-- deployment's own tools (the table's owner, a superuser) are not held to it.
CREATE OR REPLACE FUNCTION public.idem_guard_operation_insert()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
  first_state text := CASE NEW.kind WHEN 'withdrawal' THEN 'REQUESTED' ELSE 'CONFIRMED' END;
BEGIN
  IF NEW.state = first_state
     AND NEW.approvals_required IS NULL AND NEW.risk_flags IS NULL AND NEW.rejection_code IS NULL
     AND NEW.lease_owner IS NULL AND NEW.lease_expires_at IS NULL AND NEW.lease_generation = 0
     AND NEW.signed_artifact IS NULL AND NEW.tx_hash IS NULL AND NEW.chain_nonce IS NULL
     AND NEW.provider_ref IS NULL AND NEW.provider_tx_hash IS NULL AND NEW.owner IS NULL
     AND NEW.waiting_reason IS NULL AND NEW.version = 0 AND NEW.settled_at IS NULL
     AND NEW.key_expired_at IS NULL THEN
    RETURN NEW;
  END IF;
  IF current_user = pg_get_userbyid((SELECT relowner FROM pg_class WHERE oid = TG_RELID))
     OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'idem: a new % is %, with nothing reviewed, leased, signed or sent (operation %)', NEW.kind, first_state, NEW.operation_id
    USING ERRCODE = 'insufficient_privilege';
END $function$
