-- Many withdrawal creations in one statement (issue 17). The same writes as idem_create_withdrawal
-- (0014, 0021) for each item, done set by set so that a batch pays executor start-up, the WAL flush
-- and COMMIT once instead of once per item. One row comes back per item, in item order:
--   * the new operation (its operation_id is the caller's), REQUESTED with its hold or REJECTED for
--     INSUFFICIENT_FUNDS, exactly as the single function stores them;
--   * the committed holder of the item's key, else of its withdrawal id (a replay or a conflict, as
--     the single function returns it), in its state at the end of the batch;
--   * a row of NULLs when the item's asset or policy version is not the stored one (IDM02/IDM03 of
--     the single function): nothing was written for that item, and the caller sends it again alone.
-- Lock order, so that concurrent batches cannot deadlock on what the batch itself orders:
--   1. identity claims in (idempotency key, item) order, one INSERT ... ON CONFLICT DO NOTHING;
--   2. balance rows FOR UPDATE in (account, asset) order, by one statement, and held to COMMIT.
-- A batch waits on a key only while it holds no balance row, like a single creation. (Two batches
-- whose keys and withdrawal ids are ordered differently can still cross on the two unique indexes;
-- PostgreSQL then aborts one, nothing of it is written, and the caller sends its items one by one.)
-- No subtransaction: the hold is decided under the balance row's lock, from the locked value, and the
-- postings trigger's conditional UPDATE still refuses any overspend (C08) by failing the statement.
CREATE TYPE public.idem_withdrawal_item AS (
  item integer,
  operation_id uuid,
  idempotency_key text,
  reference text,
  account_ref text,
  asset_code text,
  network text,
  destination text,
  memo text,
  amount_minor numeric,
  fee_cap_minor numeric,
  policy_version integer,
  payload_hash text
);
--> statement-breakpoint
-- The balance rows a batch is about to hold from, locked until COMMIT in one global order (account,
-- then asset, byte order) as the sort hands them to the lock, with what each has available. An
-- account with no row has nothing to hold from and is not returned. The application role may not
-- lock or update balances itself (only the postings trigger moves them, 0021), so this runs as
-- idem_journal, for the tenant the transaction is bound to and no other.
CREATE FUNCTION public.idem_lock_available(p_tenant_id uuid, p_account_refs text[], p_asset_codes text[])
  RETURNS TABLE (account_ref text, asset_code text, available numeric)
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
  SET plan_cache_mode = force_generic_plan AS $$
BEGIN
  IF p_tenant_id IS DISTINCT FROM nullif(current_setting('app.tenant_id', true), '')::uuid THEN
    RAISE EXCEPTION 'idem: this transaction is not bound to that tenant' USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN QUERY
  SELECT b.account_ref, b.asset_code, b.available
    FROM public.balances b
   WHERE b.tenant_id = p_tenant_id
     AND (b.account_ref, b.asset_code) IN (SELECT * FROM unnest(p_account_refs, p_asset_codes))
   ORDER BY b.account_ref COLLATE "C", b.asset_code COLLATE "C"
     FOR UPDATE OF b;
END $$;
--> statement-breakpoint
ALTER FUNCTION public.idem_lock_available(uuid, text[], text[]) OWNER TO idem_journal;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.idem_lock_available(uuid, text[], text[]) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.idem_lock_available(uuid, text[], text[]) TO idem_app;
--> statement-breakpoint
CREATE FUNCTION public.idem_create_withdrawals(p_tenant_id uuid, p_items jsonb, p_actor text)
  RETURNS SETOF public.operations LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp
  SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_bound text := current_setting('app.tenant_id', true);
  v_items public.idem_withdrawal_item[];
  v_claimable public.idem_withdrawal_item[];
  v_rows public.operations[];
  v_out public.operations[];
  v_holders public.operations[] := '{}';
  v_holder_items integer[] := '{}';
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

  -- The items that were not created (a replay or a conflict): the committed holder of the key, else
  -- of the withdrawal id, one lookup at a time by unique index.
  FOR r IN
    SELECT i.item, i.idempotency_key, i.reference FROM unnest(v_claimable) i
     WHERE NOT (i.operation_id = ANY (v_created))
  LOOP
    SELECT o.* INTO v_operation FROM public.operations o
     WHERE o.tenant_id = p_tenant_id AND o.idempotency_key = r.idempotency_key;
    IF NOT FOUND THEN
      SELECT o.* INTO v_operation FROM public.operations o
       WHERE o.tenant_id = p_tenant_id AND o.kind = 'withdrawal' AND o.reference = r.reference;
    END IF;
    v_holders := v_holders || v_operation;
    v_holder_items := v_holder_items || r.item;
  END LOOP;

  -- One row per item, in item order: its own operation (as rejected, if it was), else its holder;
  -- NULLs for an item hashed with a stale context. Built as one array first: `(composite).*` in a
  -- select list would evaluate the composite once per column.
  v_out := ARRAY(
    SELECT coalesce(rejected.op, mine.op, holder.op)
      FROM unnest(v_items) i
      LEFT JOIN (SELECT c AS op FROM unnest(v_rows) c) mine ON (mine.op).operation_id = i.operation_id
      LEFT JOIN (SELECT c AS op FROM unnest(v_rejected_rows) c) rejected ON (rejected.op).operation_id = i.operation_id
      LEFT JOIN (SELECT v_holder_items[k] AS item, v_holders[k] AS op FROM generate_subscripts(v_holder_items, 1) k) holder
        ON holder.item = i.item
     ORDER BY i.item);
  RETURN QUERY SELECT * FROM unnest(v_out);
END $$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.idem_create_withdrawals(uuid, jsonb, text) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.idem_create_withdrawals(uuid, jsonb, text) TO idem_app;
--> statement-breakpoint
-- The single-item function likewise keeps one generic plan per statement instead of planning its
-- parameterised statements again on every call (plpgsql's default for the first calls of a session
-- and whenever a custom plan looks cheaper); every statement in it is a primary-key or unique lookup.
ALTER FUNCTION public.idem_create_withdrawal(uuid, uuid, text, text, text, text, text, text, text, numeric, numeric, integer, text, text)
  SET plan_cache_mode = force_generic_plan;
