-- The database's guards hold against a session that has the application's login (issue 11, F8).
-- (1) No temporary tables for anyone but the owner: a temp table named like a ledger table would
--     otherwise shadow it inside any function that names it unqualified.
-- (2) Balances are written only by the journal: a trigger on postings applies every posting to the
--     balance projection, as a SECURITY DEFINER function owned by a NOLOGIN role; the application
--     role keeps SELECT on balances and loses INSERT, UPDATE and DELETE.
-- (3) Every function in the schema pins search_path to pg_catalog, public, pg_temp (pg_temp last
--     and explicit: left out, PostgreSQL searches it first for relations), and the ledger functions
--     name their tables schema-qualified. The loop at the end pins functions created earlier too;
--     the test 'I11-F8 every function in schema public ...' catches any added later.

-- (1) TEMP: PUBLIC has it by default on every database; the name differs per database.
DO $$
BEGIN
  EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
  EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM idem_app, idem_metrics, idem_scheduler, idem_throttle', current_database());
END $$;
--> statement-breakpoint
-- Nothing but the owner creates objects in the schema either (already the default since PostgreSQL 15).
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
--> statement-breakpoint

-- (2) The role that owns the balance projection's writer. Roles are cluster-wide, so creation
-- tolerates a concurrent or earlier creator (as in 0001).
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'idem_journal') THEN
    CREATE ROLE idem_journal NOLOGIN NOSUPERUSER NOBYPASSRLS;
  END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;
--> statement-breakpoint
DO $$
BEGIN
  EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM idem_journal', current_database());
END $$;
--> statement-breakpoint
GRANT USAGE ON SCHEMA public TO idem_journal;
--> statement-breakpoint
GRANT SELECT, INSERT, UPDATE ON balances TO idem_journal;
--> statement-breakpoint
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON balances FROM idem_app, PUBLIC;
--> statement-breakpoint
-- The writer's only input is the postings the statement just inserted, which the inserting role's
-- own row-level security already bound to its tenant; the writer itself needs no tenant binding
-- (an owner repairing the ledger by hand has none).
CREATE POLICY journal_projection ON balances AS PERMISSIVE FOR ALL TO idem_journal USING (true) WITH CHECK (true);
--> statement-breakpoint
-- Applies the postings of one INSERT statement to the balance projection, one row per (account,
-- asset): a conditional UPDATE that keeps both buckets non-negative (C08), evaluated on the locked
-- current row (READ COMMITTED re-checks a row changed concurrently), so concurrent debits cannot
-- overspend; a pure credit of an account with no row yet creates it. If any account cannot take
-- its change, the statement fails with IDM01 and nothing of it stays. Control accounts (@custody,
-- @adjustments) have no balance row.
CREATE OR REPLACE FUNCTION public.idem_apply_postings() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
  d record;
BEGIN
  FOR d IN
    SELECT p.tenant_id, p.account, p.asset_code,
           coalesce(sum(p.amount) FILTER (WHERE p.bucket = 'available'), 0) AS available,
           coalesce(sum(p.amount) FILTER (WHERE p.bucket = 'held'), 0) AS held
      FROM inserted_postings p
     WHERE p.bucket <> 'control'
     GROUP BY p.tenant_id, p.account, p.asset_code
  LOOP
    CONTINUE WHEN d.available = 0 AND d.held = 0;
    UPDATE public.balances b
       SET available = b.available + d.available, held = b.held + d.held,
           version = b.version + 1, updated_at = now()
     WHERE b.tenant_id = d.tenant_id AND b.account_ref = d.account AND b.asset_code = d.asset_code
       AND b.available + d.available >= 0 AND b.held + d.held >= 0;
    CONTINUE WHEN FOUND;
    IF d.available < 0 OR d.held < 0 THEN
      RAISE EXCEPTION USING ERRCODE = 'IDM01', MESSAGE = 'insufficient available balance';
    END IF;
    -- A pure credit that updated nothing: the account has no row yet (or a concurrent first
    -- credit is creating it, hence ON CONFLICT).
    INSERT INTO public.balances AS b (tenant_id, account_ref, asset_code, available, held)
    VALUES (d.tenant_id, d.account, d.asset_code, d.available, d.held)
    ON CONFLICT (tenant_id, account_ref, asset_code) DO UPDATE
       SET available = b.available + excluded.available, held = b.held + excluded.held,
           version = b.version + 1, updated_at = now();
  END LOOP;
  RETURN NULL;
END $$;
--> statement-breakpoint
ALTER FUNCTION public.idem_apply_postings() OWNER TO idem_journal;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.idem_apply_postings() FROM PUBLIC;
--> statement-breakpoint
CREATE TRIGGER postings_apply_to_balances AFTER INSERT ON postings
  REFERENCING NEW TABLE AS inserted_postings
  FOR EACH STATEMENT EXECUTE FUNCTION public.idem_apply_postings();
--> statement-breakpoint

-- One journal entry in one round trip, for postEntry: the entry, its postings (the trigger above
-- applies them), all or nothing. Returns false, having written nothing, when an account cannot
-- take its change; the caller's transaction stays usable. Runs as the caller (row-level security
-- and grants apply); the deferred trigger still checks the entry balances at commit (C11).
CREATE OR REPLACE FUNCTION public.idem_post_entry(
  p_tenant_id uuid,
  p_entry_id uuid,
  p_operation_id uuid,
  p_kind text,
  p_postings jsonb
) RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
  INSERT INTO public.journal_entries (tenant_id, entry_id, operation_id, kind)
  VALUES (p_tenant_id, p_entry_id, p_operation_id, p_kind);
  INSERT INTO public.postings (tenant_id, entry_id, posting_no, account, bucket, asset_code, amount)
  SELECT p_tenant_id, p_entry_id, x.posting_no, x.account, x.bucket, x.asset_code, x.amount
    FROM jsonb_to_recordset(p_postings) AS x(posting_no integer, account text, bucket text, asset_code text, amount numeric);
  RETURN true;
EXCEPTION WHEN SQLSTATE 'IDM01' THEN
  RETURN false;
END $$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.idem_post_entry(uuid, uuid, uuid, text, jsonb) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.idem_post_entry(uuid, uuid, uuid, text, jsonb) TO idem_app;
--> statement-breakpoint

-- (3) The balance check of C11, reading the real postings whatever the caller's search_path.
CREATE OR REPLACE FUNCTION public.idem_check_entry_balanced() RETURNS trigger
  LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
  unbalanced text;
BEGIN
  SELECT asset_code INTO unbalanced FROM public.postings
   WHERE tenant_id = NEW.tenant_id AND entry_id = NEW.entry_id
   GROUP BY asset_code HAVING sum(amount) <> 0 LIMIT 1;
  IF unbalanced IS NOT NULL THEN
    RAISE EXCEPTION 'idem: journal entry % does not balance in %', NEW.entry_id, unbalanced
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint

-- Withdrawal creation (contract in 0006, 0013, 0014), with qualified names and a pinned
-- search_path. The hold is the hold entry's postings, inserted last: the trigger above places it by
-- its conditional write (C08) and raises IDM01 when the account cannot cover it, which rolls back
-- the subtransaction (entry and review) and stores the rejection, as before. Still one round trip.
CREATE OR REPLACE FUNCTION public.idem_create_withdrawal(
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
) RETURNS SETOF public.operations LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
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
END $$;
--> statement-breakpoint

-- Every other function of the schema (extension members aside), whoever created it: the guards
-- of 0001, 0003 and 0005 and the SECURITY DEFINER readers of 0003, 0005 and 0012.
DO $$
DECLARE
  fn regprocedure;
BEGIN
  FOR fn IN
    SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
      JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = 'public'
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                        WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
  LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, public, pg_temp', fn);
  END LOOP;
END $$;
