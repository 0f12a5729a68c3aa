-- Deferred trigger postings_entry_source: a journal entry that credits a customer account
-- from a control account ('@custody', '@adjustments', '@network_fees') is accepted, at commit, only
-- from the path that owns that money movement, bound to its operation: every customer posting on
-- the operation's own account, bucket and asset, the control side one account, the total the
-- operation's amount, and
-- - a deposit's credit (kind credit, from @custody), once, for a deposit operation with its evidence:
--   the chain watcher's observation credited to it (idem key deposit-chain-<id>), the custodian's
--   deposit.confirmed inbox event it was credited from (deposit-<source>-<reference>), or an
--   EXECUTED manual_credit proposal (proposal-<id>) naming the same account, asset, amount and
--   reference with enough approvals of its own;
-- - an adjustment's credit (kind credit, from @adjustments), once, for an adjustment operation made
--   by the EXECUTED adjustment proposal of the same account, asset and amount (proposal-<id>), with
--   enough approvals of its own;
-- - a reorganisation's unsettle (from @custody into held) of a withdrawal back in BROADCAST, which
--   only gives back a settlement it had.
-- The approvals are counted here as idem_guard_proposal_update counts them: distinct active members
-- who may decide, bound to the proposal's hash, never its proposer, and at least one. The
-- deployment's own tools (the table's owner, a superuser: the CLI's direct credit on a development
-- database) are not held to it. It fires for every posting that could complete such an entry, each
-- time judging the whole entry, so a session that makes the check immediate (SET CONSTRAINTS) and
-- inserts the postings one by one is judged on the last one.
CREATE OR REPLACE FUNCTION public.idem_check_entry_source()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
  entry record;
  credited text;
  control text;
  op record;
  expected_bucket text;
  stray integer;
  total numeric;
  proposal record;
  proposal_kind text;
  approvals integer;
  allowed boolean := false;
BEGIN
  SELECT min(p.account) FILTER (WHERE p.account NOT LIKE '@%' AND p.amount > 0),
         min(p.account) FILTER (WHERE p.account LIKE '@%' AND p.amount < 0)
    INTO credited, control
    FROM public.postings p
   WHERE p.tenant_id = NEW.tenant_id AND p.entry_id = NEW.entry_id;
  IF credited IS NULL OR control IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT e.operation_id, e.kind INTO entry FROM public.journal_entries e
   WHERE e.tenant_id = NEW.tenant_id AND e.entry_id = NEW.entry_id;
  IF current_user = pg_get_userbyid((SELECT relowner FROM pg_class WHERE oid = TG_RELID))
     OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    RETURN NULL;
  END IF;
  SELECT o.tenant_id, o.operation_id, o.kind, o.state, o.idempotency_key, o.reference, o.account_ref,
         o.asset_code, o.amount_minor
    INTO op FROM public.operations o
   WHERE o.tenant_id = NEW.tenant_id AND o.operation_id = entry.operation_id;
  IF FOUND THEN
    expected_bucket := CASE WHEN entry.kind = 'unsettle' THEN 'held' ELSE 'available' END;
    SELECT count(*) FILTER (WHERE p.asset_code <> op.asset_code
                              OR (p.account LIKE '@%' AND p.account <> control)
                              OR (p.account NOT LIKE '@%' AND (p.account <> op.account_ref OR p.bucket <> expected_bucket))),
           coalesce(sum(p.amount) FILTER (WHERE p.account NOT LIKE '@%'), 0)
      INTO stray, total
      FROM public.postings p
     WHERE p.tenant_id = NEW.tenant_id AND p.entry_id = NEW.entry_id;
    IF stray = 0 AND total = op.amount_minor THEN
      IF entry.kind = 'credit' AND op.state = 'CONFIRMED'
         AND ((op.kind = 'deposit' AND control = '@custody') OR (op.kind = 'adjustment' AND control = '@adjustments'))
         AND (SELECT count(*) FROM public.journal_entries e
               WHERE e.tenant_id = op.tenant_id AND e.operation_id = op.operation_id AND e.kind = 'credit') = 1 THEN
        IF op.kind = 'deposit' THEN
          allowed := EXISTS (
            SELECT 1 FROM public.deposit_observations d
             WHERE d.tenant_id = op.tenant_id AND d.deposit_id = op.reference
               AND op.idempotency_key = 'deposit-chain-' || d.deposit_id
               AND d.operation_id = op.operation_id AND d.status = 'credited'
               AND d.account_ref = op.account_ref AND d.asset_code = op.asset_code
               AND d.amount_minor = op.amount_minor
          ) OR EXISTS (
            SELECT 1 FROM public.inbox_events i
             WHERE i.tenant_id = op.tenant_id
               AND op.idempotency_key = 'deposit-' || i.source || '-' || op.reference
               AND i.event_type = 'deposit.confirmed' AND i.status IN ('RECEIVED', 'PROCESSED')
               AND i.body -> 'data' ->> 'reference' = op.reference
               AND i.body -> 'data' ->> 'accountId' = op.account_ref
               AND i.body -> 'data' ->> 'asset' = op.asset_code
               AND i.body -> 'data' ->> 'amountMinor' = op.amount_minor::text
          );
        END IF;
        proposal_kind := CASE op.kind WHEN 'deposit' THEN 'manual_credit' ELSE 'adjustment' END;
        IF NOT allowed AND op.idempotency_key ~ '^proposal-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
          SELECT p.proposal_id, p.payload, p.payload_hash, p.proposed_by, p.approvals_required INTO proposal
            FROM public.proposals p
           WHERE p.tenant_id = op.tenant_id AND p.proposal_id = substring(op.idempotency_key from 10)::uuid
             AND p.kind = proposal_kind AND p.state = 'EXECUTED'
             AND p.payload ->> 'accountId' = op.account_ref AND p.payload ->> 'asset' = op.asset_code
             AND p.payload ->> 'amountMinor' = op.amount_minor::text
             AND (op.kind = 'adjustment' OR p.payload ->> 'reference' = op.reference);
          IF FOUND THEN
            SELECT count(DISTINCT d.approver) INTO approvals FROM public.proposal_decisions d
              JOIN public.staff_users s ON s.tenant_id = d.tenant_id AND d.approver = 'staff:' || s.user_id::text
             WHERE d.tenant_id = op.tenant_id AND d.proposal_id = proposal.proposal_id
               AND d.decision = 'approve' AND d.payload_hash = proposal.payload_hash
               AND d.approver <> proposal.proposed_by
               AND s.disabled_at IS NULL AND s.role IN ('approver', 'admin');
            allowed := approvals >= greatest(proposal.approvals_required, 1);
          END IF;
        END IF;
      ELSIF entry.kind = 'unsettle' AND op.kind = 'withdrawal' AND control = '@custody' AND op.state = 'BROADCAST' THEN
        SELECT count(*) FILTER (WHERE e.kind = 'settle') = count(*) FILTER (WHERE e.kind = 'unsettle')
               AND count(*) FILTER (WHERE e.kind = 'settle') > 0
          INTO allowed
          FROM public.journal_entries e
         WHERE e.tenant_id = op.tenant_id AND e.operation_id = op.operation_id;
      END IF;
    END IF;
  END IF;
  IF NOT allowed THEN
    RAISE EXCEPTION 'idem: journal entry % credits % from %: only an executed proposal, a deposit with its evidence or a reorganised settlement may', NEW.entry_id, credited, control
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NULL;
END $function$
