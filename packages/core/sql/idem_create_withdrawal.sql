-- Creates one withdrawal in one round trip (createWithdrawal, and a submission sent alone): binds the
-- transaction to the tenant and the restricted role, checks the caller's asset and policy version
-- (IDM02 unknown asset, IDM03 stale version), claims the key and reference, records the history
-- and review, and places the hold last (its postings, through idem_apply_postings) so a hot
-- account's row lock is held for the shortest time. A refused hold rolls back the subtransaction
-- and stores the rejection. Returns the new operation, or the holder when the key or reference is
-- taken, so the caller can tell a replay from a conflict without a second read. Runs as the caller
-- (SECURITY INVOKER): row-level security and grants apply.
CREATE OR REPLACE FUNCTION public.idem_create_withdrawal(p_tenant_id uuid, p_operation_id uuid, p_idempotency_key text, p_reference text, p_account_ref text, p_asset_code text, p_network text, p_destination text, p_memo text, p_amount_minor numeric, p_fee_cap_minor numeric, p_policy_version integer, p_payload_hash text, p_actor text)
 RETURNS SETOF operations
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
  v_operation public.operations;
  v_entry_id uuid := gen_random_uuid();
  v_bound text := current_setting('app.tenant_id', true);
  v_network text;
  v_policy_version integer;
BEGIN
  IF coalesce(v_bound, '') NOT IN ('', p_tenant_id::text) THEN
    RAISE EXCEPTION 'idem: this transaction is bound to another tenant' USING ERRCODE = 'insufficient_privilege';
  END IF;
  PERFORM set_config('app.tenant_id', p_tenant_id::text, true), set_config('role', 'idem_app', true);

  SELECT a.network, t.policy_version INTO v_network, v_policy_version
    FROM public.assets a JOIN public.tenants t ON t.tenant_id = a.tenant_id
   WHERE a.tenant_id = p_tenant_id AND a.code = p_asset_code;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'IDM02', MESSAGE = 'unknown asset ' || p_asset_code;
  END IF;
  IF v_network IS DISTINCT FROM p_network OR v_policy_version IS DISTINCT FROM p_policy_version THEN
    RAISE EXCEPTION USING ERRCODE = 'IDM03', MESSAGE = 'stale withdrawal context',
      DETAIL = json_build_object('network', v_network, 'policyVersion', v_policy_version)::text;
  END IF;

  IF p_amount_minor IS NULL OR p_amount_minor <= 0 THEN
    RAISE EXCEPTION 'idem: a withdrawal amount must be positive' USING ERRCODE = 'check_violation';
  END IF;

  -- The identity claim: no conflict target, so either unique constraint decides (seed 002).
  INSERT INTO public.operations (tenant_id, operation_id, kind, idempotency_key, reference, account_ref, asset_code,
                          network, destination, memo, amount_minor, fee_cap_minor, policy_version, payload_hash, state)
  VALUES (p_tenant_id, p_operation_id, 'withdrawal', p_idempotency_key, p_reference, p_account_ref, p_asset_code,
          p_network, p_destination, p_memo, p_amount_minor, p_fee_cap_minor, p_policy_version, p_payload_hash, 'REQUESTED')
  ON CONFLICT DO NOTHING
  RETURNING * INTO v_operation;
  IF NOT FOUND THEN
    -- Taken: the holder has committed (the INSERT waited for it), and this statement's fresh
    -- snapshot sees it. The key's holder first: that is the replay or the changed payload.
    -- A WAL record makes this commit wait for the synchronous standby, as a creation's does (a
    -- transaction that wrote none does not wait): the holder may be a commit the standby never
    -- confirmed, visible after the primary's crash recovery, and an answer read from it must not
    -- outlive a failover (docs/OPERATIONS.md).
    PERFORM pg_logical_emit_message(true, 'idem', 'answer once replicated');
    RETURN QUERY SELECT * FROM public.operations
      WHERE tenant_id = p_tenant_id AND idempotency_key = p_idempotency_key;
    IF NOT FOUND THEN
      RETURN QUERY SELECT * FROM public.operations
        WHERE tenant_id = p_tenant_id AND kind = 'withdrawal' AND reference = p_reference;
    END IF;
    RETURN;
  END IF;

  INSERT INTO public.operation_transitions (tenant_id, operation_id, seq, from_state, to_state, actor, reason)
  VALUES (p_tenant_id, p_operation_id, v_operation.version, NULL, 'REQUESTED', p_actor, 'withdrawal requested');
  INSERT INTO public.work_items (tenant_id, work_id, topic, operation_id, payload)
  VALUES (p_tenant_id, gen_random_uuid(), 'operation.state_changed', p_operation_id,
          jsonb_build_object('operationId', p_operation_id, 'from', NULL, 'to', 'REQUESTED', 'version', v_operation.version));

  -- The hold goes last, so the account's row lock is held only from here to COMMIT: the journal
  -- entry and the review work item are written first, inside a block that rolls them back
  -- (a subtransaction) when the postings' trigger finds too little available (C08).
  BEGIN
    INSERT INTO public.journal_entries (tenant_id, entry_id, operation_id, kind)
    VALUES (p_tenant_id, v_entry_id, p_operation_id, 'hold');
    INSERT INTO public.work_items (tenant_id, work_id, topic, operation_id, payload)
    VALUES (p_tenant_id, gen_random_uuid(), 'withdrawal.review', p_operation_id,
            jsonb_build_object('operationId', p_operation_id));
    INSERT INTO public.postings (tenant_id, entry_id, posting_no, account, bucket, asset_code, amount)
    VALUES (p_tenant_id, v_entry_id, 1, p_account_ref, 'available', p_asset_code, -p_amount_minor),
           (p_tenant_id, v_entry_id, 2, p_account_ref, 'held', p_asset_code, p_amount_minor);
  EXCEPTION WHEN SQLSTATE 'IDM01' THEN
    -- Stored as a rejection so that a replay returns the same answer (C03). No hold, no entry.
    UPDATE public.operations
       SET state = 'REJECTED', rejection_code = 'INSUFFICIENT_FUNDS', version = version + 1,
           updated_at = now(), settled_at = now()
     WHERE tenant_id = p_tenant_id AND operation_id = p_operation_id AND state = 'REQUESTED'
    RETURNING * INTO v_operation;
    INSERT INTO public.operation_transitions (tenant_id, operation_id, seq, from_state, to_state, actor, reason)
    VALUES (p_tenant_id, p_operation_id, v_operation.version, 'REQUESTED', 'REJECTED', p_actor,
            'insufficient available balance at intake; no hold was placed');
    INSERT INTO public.work_items (tenant_id, work_id, topic, operation_id, payload)
    VALUES (p_tenant_id, gen_random_uuid(), 'operation.state_changed', p_operation_id,
            jsonb_build_object('operationId', p_operation_id, 'from', 'REQUESTED', 'to', 'REJECTED', 'version', v_operation.version));
  END;
  RETURN NEXT v_operation;
END $function$

