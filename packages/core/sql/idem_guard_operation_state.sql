-- Trigger operations_guard_state: an operation's state moves only along its kind's
-- transition table (src/state-machine/transitions.ts), and a withdrawal becomes APPROVED from
-- REQUESTED only when it was reviewed, its hold is in the journal and not released, and either the
-- distinct approvals bound to its stored payload hash reach what it needs (its reviewed count, never
-- under idem_withdrawal_approvals_floor), each by an active member who may decide (approver, admin)
-- and is neither its requester nor cooling off, or it needs none: the rules in force auto-approve it.
-- The review's count is written once, while REQUESTED, and never under that floor. So whoever holds
-- the application's login cannot approve a withdrawal with a statement. The deployment's own tools
-- (the table's owner, a superuser) are not held to it.
CREATE OR REPLACE FUNCTION public.idem_guard_operation_state()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
  needed integer;
  given integer;
  requester text;
  allowed boolean;
BEGIN
  IF current_user = pg_get_userbyid((SELECT relowner FROM pg_class WHERE oid = TG_RELID))
     OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    RETURN NEW;
  END IF;
  IF NEW.approvals_required IS DISTINCT FROM OLD.approvals_required THEN
    IF NEW.kind <> 'withdrawal' OR OLD.approvals_required IS NOT NULL OR NEW.approvals_required IS NULL
       OR OLD.state <> 'REQUESTED' OR NEW.state <> 'REQUESTED' THEN
      RAISE EXCEPTION 'idem: operation % records its approvals needed once, at its review', OLD.operation_id
        USING ERRCODE = 'insufficient_privilege';
    END IF;
    needed := public.idem_withdrawal_approvals_floor(NEW.tenant_id, NEW.operation_id);
    IF NEW.approvals_required < needed THEN
      RAISE EXCEPTION 'idem: withdrawal % needs at least % approval(s) under the rules in force', OLD.operation_id, needed
        USING ERRCODE = 'insufficient_privilege';
    END IF;
  END IF;
  IF NEW.state = OLD.state THEN
    RETURN NEW;
  END IF;
  allowed := CASE NEW.kind
    WHEN 'withdrawal' THEN (OLD.state, NEW.state) IN (
      ('REQUESTED', 'APPROVED'), ('REQUESTED', 'REJECTED'),
      ('APPROVED', 'SIGNING'), ('APPROVED', 'REJECTED'),
      ('SIGNING', 'SIGNED'), ('SIGNING', 'APPROVED'), ('SIGNING', 'FAILED_TERMINAL'),
      ('SIGNED', 'BROADCAST'), ('SIGNED', 'UNKNOWN'),
      ('BROADCAST', 'CONFIRMED'), ('BROADCAST', 'UNKNOWN'), ('BROADCAST', 'FAILED_TERMINAL'),
      ('BROADCAST', 'VERIFIED_NOT_SENT'),
      ('UNKNOWN', 'BROADCAST'), ('UNKNOWN', 'CONFIRMED'), ('UNKNOWN', 'VERIFIED_NOT_SENT'),
      ('CONFIRMED', 'BROADCAST'),
      ('FAILED_TERMINAL', 'CONFIRMED'), ('FAILED_TERMINAL', 'VERIFIED_NOT_SENT'))
    WHEN 'deposit' THEN OLD.state = 'CONFIRMED' AND NEW.state = 'REVERSED'
    ELSE false
  END;
  IF NOT allowed THEN
    RAISE EXCEPTION 'idem: % % cannot go from % to %', NEW.kind, OLD.operation_id, OLD.state, NEW.state
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF NEW.state <> 'APPROVED' OR OLD.state <> 'REQUESTED' THEN
    RETURN NEW;
  END IF;
  IF NEW.approvals_required IS NULL THEN
    RAISE EXCEPTION 'idem: withdrawal % cannot be APPROVED before its risk review', OLD.operation_id
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF NOT EXISTS (
    SELECT 1 FROM public.journal_entries e
      JOIN public.postings p ON p.tenant_id = e.tenant_id AND p.entry_id = e.entry_id
     WHERE e.tenant_id = NEW.tenant_id AND e.operation_id = NEW.operation_id AND e.kind = 'hold'
       AND p.account = NEW.account_ref AND p.bucket = 'held' AND p.asset_code = NEW.asset_code
       AND p.amount = NEW.amount_minor
  ) OR EXISTS (
    SELECT 1 FROM public.journal_entries e
     WHERE e.tenant_id = NEW.tenant_id AND e.operation_id = NEW.operation_id AND e.kind = 'release'
  ) THEN
    RAISE EXCEPTION 'idem: withdrawal % cannot be APPROVED: its hold is not in the journal', OLD.operation_id
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  needed := greatest(NEW.approvals_required, public.idem_withdrawal_approvals_floor(NEW.tenant_id, NEW.operation_id));
  IF needed = 0 THEN
    RETURN NEW;
  END IF;
  SELECT t.actor INTO requester FROM public.operation_transitions t
   WHERE t.tenant_id = NEW.tenant_id AND t.operation_id = NEW.operation_id AND t.from_state IS NULL
   ORDER BY t.seq LIMIT 1;
  SELECT count(DISTINCT a.approver) INTO given FROM public.approvals a
    JOIN public.staff_users s ON s.tenant_id = a.tenant_id AND a.approver = 'staff:' || s.user_id::text
   WHERE a.tenant_id = NEW.tenant_id AND a.operation_id = NEW.operation_id
     AND a.decision = 'approve' AND a.payload_hash = NEW.payload_hash
     AND a.approver IS DISTINCT FROM requester
     AND s.disabled_at IS NULL AND s.role IN ('approver', 'admin')
     AND (s.approvals_from IS NULL OR s.approvals_from <= now());
  IF given < needed THEN
    RAISE EXCEPTION 'idem: withdrawal % cannot be APPROVED: % of % approvals by distinct active members, bound to its payload hash', OLD.operation_id, given, needed
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END $function$
