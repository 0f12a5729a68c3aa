-- Withdrawal creation with the hold placed last (see 0006 for the function's contract): the row
-- lock on a hot account is then held for the shortest time, measured by the core bench.
CREATE OR REPLACE FUNCTION idem_create_withdrawal(
  p_tenant_id uuid,
  p_operation_id uuid,
  p_idempotency_key text,
  p_reference text,
  p_account_ref text,
  p_asset_code text,
  p_network text,
  p_destination text,
  p_memo text,
  p_amount_minor numeric,
  p_fee_cap_minor numeric,
  p_policy_version integer,
  p_payload_hash text,
  p_actor text
) RETURNS SETOF operations LANGUAGE plpgsql AS $$
DECLARE
  v_operation operations;
  v_entry_id uuid := gen_random_uuid();
BEGIN
  IF p_amount_minor IS NULL OR p_amount_minor <= 0 THEN
    RAISE EXCEPTION 'idem: a withdrawal amount must be positive' USING ERRCODE = 'check_violation';
  END IF;

  -- The identity claim: no conflict target, so either unique constraint decides (seed 002).
  INSERT INTO operations (tenant_id, operation_id, kind, idempotency_key, reference, account_ref, asset_code,
                          network, destination, memo, amount_minor, fee_cap_minor, policy_version, payload_hash, state)
  VALUES (p_tenant_id, p_operation_id, 'withdrawal', p_idempotency_key, p_reference, p_account_ref, p_asset_code,
          p_network, p_destination, p_memo, p_amount_minor, p_fee_cap_minor, p_policy_version, p_payload_hash, 'REQUESTED')
  ON CONFLICT DO NOTHING
  RETURNING * INTO v_operation;
  IF NOT FOUND THEN
    RETURN;
  END IF;

  INSERT INTO operation_transitions (tenant_id, operation_id, seq, from_state, to_state, actor, reason)
  VALUES (p_tenant_id, p_operation_id, v_operation.version, NULL, 'REQUESTED', p_actor, 'withdrawal requested');
  INSERT INTO work_items (tenant_id, work_id, topic, operation_id, payload)
  VALUES (p_tenant_id, gen_random_uuid(), 'operation.state_changed', p_operation_id,
          jsonb_build_object('operationId', p_operation_id, 'from', NULL, 'to', 'REQUESTED', 'version', v_operation.version));

  -- The hold goes last, so the account's row lock is held only from here to COMMIT: the journal
  -- entry and the review work item are written first, inside a block that rolls them back
  -- (a subtransaction) when the conditional UPDATE finds too little available (C08).
  BEGIN
    INSERT INTO journal_entries (tenant_id, entry_id, operation_id, kind)
    VALUES (p_tenant_id, v_entry_id, p_operation_id, 'hold');
    INSERT INTO postings (tenant_id, entry_id, posting_no, account, bucket, asset_code, amount)
    VALUES (p_tenant_id, v_entry_id, 1, p_account_ref, 'available', p_asset_code, -p_amount_minor),
           (p_tenant_id, v_entry_id, 2, p_account_ref, 'held', p_asset_code, p_amount_minor);
    INSERT INTO work_items (tenant_id, work_id, topic, operation_id, payload)
    VALUES (p_tenant_id, gen_random_uuid(), 'withdrawal.review', p_operation_id,
            jsonb_build_object('operationId', p_operation_id));
    UPDATE balances
       SET available = available - p_amount_minor, held = held + p_amount_minor,
           version = version + 1, updated_at = now()
     WHERE tenant_id = p_tenant_id AND account_ref = p_account_ref AND asset_code = p_asset_code
       AND available >= p_amount_minor;
    IF NOT FOUND THEN
      RAISE EXCEPTION USING ERRCODE = 'IDM01', MESSAGE = 'insufficient available balance';
    END IF;
  EXCEPTION WHEN SQLSTATE 'IDM01' THEN
    -- Stored as a rejection so that a replay returns the same answer (C03). No hold, no entry.
    UPDATE operations
       SET state = 'REJECTED', rejection_code = 'INSUFFICIENT_FUNDS', version = version + 1,
           updated_at = now(), settled_at = now()
     WHERE tenant_id = p_tenant_id AND operation_id = p_operation_id AND state = 'REQUESTED'
    RETURNING * INTO v_operation;
    INSERT INTO operation_transitions (tenant_id, operation_id, seq, from_state, to_state, actor, reason)
    VALUES (p_tenant_id, p_operation_id, v_operation.version, 'REQUESTED', 'REJECTED', p_actor,
            'insufficient available balance at intake; no hold was placed');
    INSERT INTO work_items (tenant_id, work_id, topic, operation_id, payload)
    VALUES (p_tenant_id, gen_random_uuid(), 'operation.state_changed', p_operation_id,
            jsonb_build_object('operationId', p_operation_id, 'from', 'REQUESTED', 'to', 'REJECTED', 'version', v_operation.version));
  END;
  RETURN NEXT v_operation;
END $$;
