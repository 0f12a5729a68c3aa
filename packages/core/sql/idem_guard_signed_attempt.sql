-- Trigger signed_attempts_guard_insert: keeps "at most one transfer" true whatever the application
-- does. Every attempt carries the operation's nonce, attempt 1 is the operation's own signed bytes,
-- later attempts are numbered in order and fenced by the lease generation, and only a cancel
-- follows a cancel.
CREATE OR REPLACE FUNCTION public.idem_guard_signed_attempt()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
  op record;
  previous record;
BEGIN
  SELECT kind, state, chain_nonce, signed_artifact, tx_hash, lease_generation INTO op
    FROM public.operations WHERE tenant_id = NEW.tenant_id AND operation_id = NEW.operation_id;
  IF NOT FOUND OR op.kind <> 'withdrawal' THEN
    RAISE EXCEPTION 'idem: no withdrawal % for this attempt', NEW.operation_id
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  -- One nonce per operation: every attempt replaces the others, never adds a transfer.
  IF op.chain_nonce IS NULL OR NEW.nonce IS DISTINCT FROM op.chain_nonce THEN
    RAISE EXCEPTION 'idem: attempt nonce % is not operation %''s nonce %', NEW.nonce, NEW.operation_id, op.chain_nonce
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.attempt_no = 1 THEN
    IF NEW.signed_artifact IS DISTINCT FROM op.signed_artifact OR NEW.tx_hash IS DISTINCT FROM op.tx_hash THEN
      RAISE EXCEPTION 'idem: attempt 1 of % must be the operation''s own signed bytes', NEW.operation_id
        USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
  END IF;
  SELECT kind INTO previous FROM public.signed_attempts
   WHERE tenant_id = NEW.tenant_id AND operation_id = NEW.operation_id AND attempt_no = NEW.attempt_no - 1;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'idem: attempt % of % does not follow attempt %', NEW.attempt_no, NEW.operation_id, NEW.attempt_no - 1
      USING ERRCODE = 'check_violation';
  END IF;
  IF previous.kind = 'cancel' AND NEW.kind <> 'cancel' THEN
    RAISE EXCEPTION 'idem: operation % is being cancelled; only a higher-fee cancel may follow', NEW.operation_id
      USING ERRCODE = 'check_violation';
  END IF;
  IF op.state NOT IN ('BROADCAST', 'UNKNOWN') THEN
    RAISE EXCEPTION 'idem: operation % is %; only a sent, unsettled withdrawal is replaced', NEW.operation_id, op.state
      USING ERRCODE = 'check_violation';
  END IF;
  -- Fenced: the writer must hold the operation's current lease generation.
  IF NEW.lease_generation IS DISTINCT FROM op.lease_generation THEN
    RAISE EXCEPTION 'idem: stale lease generation % for operation % (now %)', NEW.lease_generation, NEW.operation_id, op.lease_generation
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $function$

