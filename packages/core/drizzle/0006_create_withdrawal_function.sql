-- Withdrawal creation as one statement. The application validates the request and computes the
-- payload hash; this function does the writes of creation in one round trip, with plans cached
-- by plpgsql: claim the identity, record the history, place the hold by a conditional UPDATE
-- (C08) with its journal entry, and write the work items, all in the caller's transaction (C10).
-- It runs as the caller (SECURITY INVOKER), so row-level security and grants apply as to any
-- statement of the application role. No row back means the key or the reference is taken: the
-- caller then reads who holds them. The deferred trigger still checks that the entry balances.
CREATE FUNCTION idem_create_withdrawal(
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

  -- The hold: the data store refuses an overspend (C08).
  UPDATE balances
     SET available = available - p_amount_minor, held = held + p_amount_minor,
         version = version + 1, updated_at = now()
   WHERE tenant_id = p_tenant_id AND account_ref = p_account_ref AND asset_code = p_asset_code
     AND available >= p_amount_minor;

  IF NOT FOUND THEN
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
    RETURN NEXT v_operation;
    RETURN;
  END IF;

  INSERT INTO journal_entries (tenant_id, entry_id, operation_id, kind)
  VALUES (p_tenant_id, v_entry_id, p_operation_id, 'hold');
  INSERT INTO postings (tenant_id, entry_id, posting_no, account, bucket, asset_code, amount)
  VALUES (p_tenant_id, v_entry_id, 1, p_account_ref, 'available', p_asset_code, -p_amount_minor),
         (p_tenant_id, v_entry_id, 2, p_account_ref, 'held', p_asset_code, p_amount_minor);
  INSERT INTO work_items (tenant_id, work_id, topic, operation_id, payload)
  VALUES (p_tenant_id, gen_random_uuid(), 'withdrawal.review', p_operation_id,
          jsonb_build_object('operationId', p_operation_id));
  RETURN NEXT v_operation;
END $$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION idem_create_withdrawal(uuid, uuid, text, text, text, text, text, text, text, numeric, numeric, integer, text, text) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION idem_create_withdrawal(uuid, uuid, text, text, text, text, text, text, text, numeric, numeric, integer, text, text) TO idem_app;
