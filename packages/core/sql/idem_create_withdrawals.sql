-- Creates a batch of one tenant's withdrawals in one statement (the submission batcher): the
-- identity claims in key order, then the holds account by account in one global order on the rows
-- idem_lock_available locked, each taken if what is left covers it, as the same calls one after
-- another would be; the others are stored REJECTED. Answers one row per item, in item order: its
-- operation, the holder of its key or reference, or NULLs when hashed with a stale asset or policy
-- version.
CREATE OR REPLACE FUNCTION public.idem_create_withdrawals(p_tenant_id uuid, p_items jsonb, p_actor text)
 RETURNS SETOF operations
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
  v_bound text := current_setting('app.tenant_id', true);
  v_items public.idem_withdrawal_item[];
  v_claimable public.idem_withdrawal_item[];
  v_rows public.operations[];
  v_rejected_rows public.operations[] := '{}';
  v_operation public.operations;
  v_id uuid;
  v_created uuid[];
  v_held uuid[] := '{}';
  v_rejected uuid[] := '{}';
  v_account text;
  v_asset text;
  v_left numeric;
  r record;
BEGIN
  IF coalesce(v_bound, '') NOT IN ('', p_tenant_id::text) THEN
    RAISE EXCEPTION 'idem: this transaction is bound to another tenant' USING ERRCODE = 'insufficient_privilege';
  END IF;
  PERFORM set_config('app.tenant_id', p_tenant_id::text, true), set_config('role', 'idem_app', true);

  v_items := ARRAY(SELECT x FROM jsonb_populate_recordset(NULL::public.idem_withdrawal_item, p_items) x ORDER BY x.item);
  IF EXISTS (SELECT 1 FROM unnest(v_items) i WHERE i.amount_minor IS NULL OR i.amount_minor <= 0) THEN
    RAISE EXCEPTION 'idem: a withdrawal amount must be positive' USING ERRCODE = 'check_violation';
  END IF;
  IF (SELECT count(DISTINCT i.item) <> count(*) OR count(DISTINCT i.operation_id) <> count(*) FROM unnest(v_items) i) THEN
    RAISE EXCEPTION 'idem: batch items need distinct item numbers and operation ids' USING ERRCODE = 'invalid_parameter_value';
  END IF;

  -- Items hashed with the stored network and policy version; the others are answered with NULLs.
  v_claimable := ARRAY(
    SELECT i FROM unnest(v_items) i
      JOIN public.assets a ON a.tenant_id = p_tenant_id AND a.code = i.asset_code AND a.network = i.network
      JOIN public.tenants t ON t.tenant_id = p_tenant_id AND t.policy_version = i.policy_version
     ORDER BY i.idempotency_key COLLATE "C", i.item);

  -- 1. The identity claims, in key order. No conflict target: either unique constraint decides, and
  -- a second item of this batch with a claimed key or withdrawal id is skipped like a later caller.
  -- The new rows come back whole, so nothing below reads them again.
  WITH claimed AS (
    INSERT INTO public.operations AS o (tenant_id, operation_id, kind, idempotency_key, reference, account_ref, asset_code,
                                        network, destination, memo, amount_minor, fee_cap_minor, policy_version, payload_hash, state)
    SELECT p_tenant_id, i.operation_id, 'withdrawal', i.idempotency_key, i.reference, i.account_ref, i.asset_code,
           i.network, i.destination, i.memo, i.amount_minor, i.fee_cap_minor, i.policy_version, i.payload_hash, 'REQUESTED'
      FROM unnest(v_claimable) WITH ORDINALITY AS i
     ORDER BY i.ordinality
    ON CONFLICT DO NOTHING
    RETURNING o
  )
  SELECT coalesce(array_agg(claimed.o), '{}') INTO v_rows FROM claimed;
  v_created := ARRAY(SELECT c.operation_id FROM unnest(v_rows) c);

  INSERT INTO public.operation_transitions (tenant_id, operation_id, seq, from_state, to_state, actor, reason)
  SELECT p_tenant_id, c.operation_id, c.version, NULL, 'REQUESTED', p_actor, 'withdrawal requested'
    FROM unnest(v_rows) c;
  INSERT INTO public.work_items (tenant_id, work_id, topic, operation_id, payload)
  SELECT p_tenant_id, gen_random_uuid(), 'operation.state_changed', c.operation_id,
         jsonb_build_object('operationId', c.operation_id, 'from', NULL, 'to', 'REQUESTED', 'version', c.version)
    FROM unnest(v_rows) c;

  -- 2. The holds, account by account in one global order; within an account in item order, each
  -- taken if what is left covers it, as the same calls one after another would be.
  FOR r IN
    WITH locked AS MATERIALIZED (
      SELECT * FROM public.idem_lock_available(p_tenant_id,
        ARRAY(SELECT i.account_ref FROM unnest(v_claimable) i WHERE i.operation_id = ANY (v_created)),
        ARRAY(SELECT i.asset_code FROM unnest(v_claimable) i WHERE i.operation_id = ANY (v_created)))
    )
    SELECT i.operation_id, i.account_ref, i.asset_code, i.amount_minor, coalesce(l.available, 0) AS available
      FROM unnest(v_claimable) i
      LEFT JOIN locked l ON l.account_ref = i.account_ref AND l.asset_code = i.asset_code
     WHERE i.operation_id = ANY (v_created)
     ORDER BY i.account_ref COLLATE "C", i.asset_code COLLATE "C", i.item
  LOOP
    IF v_account IS DISTINCT FROM r.account_ref OR v_asset IS DISTINCT FROM r.asset_code THEN
      v_account := r.account_ref;
      v_asset := r.asset_code;
      v_left := r.available;
    END IF;
    IF r.amount_minor <= v_left THEN
      v_left := v_left - r.amount_minor;
      v_held := v_held || r.operation_id;
    ELSE
      v_rejected := v_rejected || r.operation_id;
    END IF;
  END LOOP;

  -- The held ones: entry, review work item and postings. The postings' trigger moves each balance
  -- once by its conditional UPDATE and fails the whole statement if an account cannot cover it.
  IF cardinality(v_held) > 0 THEN
    WITH held AS MATERIALIZED (
      SELECT i.operation_id, i.account_ref, i.asset_code, i.amount_minor, gen_random_uuid() AS entry_id
        FROM unnest(v_claimable) i WHERE i.operation_id = ANY (v_held)
    ), entries AS (
      INSERT INTO public.journal_entries (tenant_id, entry_id, operation_id, kind)
      SELECT p_tenant_id, h.entry_id, h.operation_id, 'hold' FROM held h
    )
    INSERT INTO public.postings (tenant_id, entry_id, posting_no, account, bucket, asset_code, amount)
    SELECT p_tenant_id, h.entry_id, leg.posting_no, h.account_ref, leg.bucket, h.asset_code, leg.sign * h.amount_minor
      FROM held h CROSS JOIN (VALUES (1, 'available', -1), (2, 'held', 1)) AS leg(posting_no, bucket, sign);
    INSERT INTO public.work_items (tenant_id, work_id, topic, operation_id, payload)
    SELECT p_tenant_id, gen_random_uuid(), 'withdrawal.review', h, jsonb_build_object('operationId', h)
      FROM unnest(v_held) h;
  END IF;

  -- The rejected ones: stored as REJECTED so that a replay returns the same answer (C03). One row at
  -- a time by primary key: rejections are the exception.
  FOREACH v_id IN ARRAY v_rejected LOOP
    UPDATE public.operations
       SET state = 'REJECTED', rejection_code = 'INSUFFICIENT_FUNDS', version = version + 1,
           updated_at = now(), settled_at = now()
     WHERE tenant_id = p_tenant_id AND operation_id = v_id AND state = 'REQUESTED'
    RETURNING * INTO v_operation;
    v_rejected_rows := v_rejected_rows || v_operation;
    INSERT INTO public.operation_transitions (tenant_id, operation_id, seq, from_state, to_state, actor, reason)
    VALUES (p_tenant_id, v_id, v_operation.version, 'REQUESTED', 'REJECTED', p_actor,
            'insufficient available balance at intake; no hold was placed');
    INSERT INTO public.work_items (tenant_id, work_id, topic, operation_id, payload)
    VALUES (p_tenant_id, gen_random_uuid(), 'operation.state_changed', v_id,
            jsonb_build_object('operationId', v_id, 'from', 'REQUESTED', 'to', 'REJECTED', 'version', v_operation.version));
  END LOOP;

  -- A WAL record makes this commit wait for the synchronous standby even when every item was a
  -- replay (a transaction that wrote none does not wait): an answer read from a holder the standby
  -- never confirmed must not outlive a failover.
  PERFORM pg_logical_emit_message(true, 'idem', 'answer once replicated');

  -- One row per item, in item order: its own operation (as rejected, if it was); else, for an item
  -- that was claimable, the committed holder of its key, else of its withdrawal id (a replay or a
  -- conflict), looked up only for those; NULLs for an item hashed with a stale context. An unmatched
  -- side of a LEFT JOIN is a NULL row, so coalesce passes over it; the subquery keeps each row's
  -- composite to one evaluation.
  RETURN QUERY
  SELECT (s.op).* FROM (
    SELECT coalesce(rejected, mine,
             CASE WHEN claimable.item IS NOT NULL THEN coalesce(
               (SELECT o FROM public.operations o
                 WHERE o.tenant_id = p_tenant_id AND o.idempotency_key = i.idempotency_key),
               (SELECT o FROM public.operations o
                 WHERE o.tenant_id = p_tenant_id AND o.kind = 'withdrawal' AND o.reference = i.reference))
             END) AS op
      FROM unnest(v_items) i
      LEFT JOIN unnest(v_rows) mine ON mine.operation_id = i.operation_id
      LEFT JOIN unnest(v_rejected_rows) rejected ON rejected.operation_id = i.operation_id
      LEFT JOIN (SELECT c.item FROM unnest(v_claimable) c) claimable ON claimable.item = i.item
     ORDER BY i.item OFFSET 0) s;
END $function$

