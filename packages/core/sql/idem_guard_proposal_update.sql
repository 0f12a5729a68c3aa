-- Trigger proposals_guard_update: what was proposed (payload, evidence, hash, proposer, expiry)
-- never changes. A proposal leaves PENDING once: to EXECUTED (or, for a control change, APPROVED)
-- only before it expires and with enough distinct approvals bound to the stored hash, none of them
-- the proposer's, each by a member still active whose role may still decide it (admins for a
-- control change); to EXPIRED only once its time is up. An APPROVED control change becomes EXECUTED
-- only once its effective time (set on approval, at least the tenant's delay away) has come, and
-- with its approvals still counting; or it is REJECTED.
CREATE OR REPLACE FUNCTION public.idem_guard_proposal_update()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
  approvals integer;
  delay_seconds integer;
BEGIN
  IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id OR NEW.proposal_id IS DISTINCT FROM OLD.proposal_id
     OR NEW.kind IS DISTINCT FROM OLD.kind OR NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key
     OR NEW.target_operation_id IS DISTINCT FROM OLD.target_operation_id
     OR NEW.payload IS DISTINCT FROM OLD.payload OR NEW.evidence IS DISTINCT FROM OLD.evidence
     OR NEW.payload_hash IS DISTINCT FROM OLD.payload_hash OR NEW.proposed_by IS DISTINCT FROM OLD.proposed_by
     OR NEW.approvals_required IS DISTINCT FROM OLD.approvals_required
     OR NEW.created_at IS DISTINCT FROM OLD.created_at OR NEW.expires_at IS DISTINCT FROM OLD.expires_at THEN
    RAISE EXCEPTION 'idem: proposal % is immutable; only its outcome is recorded', OLD.proposal_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF OLD.state NOT IN ('PENDING', 'APPROVED')
     OR (OLD.state = 'APPROVED' AND NEW.state NOT IN ('EXECUTED', 'REJECTED')) THEN
    RAISE EXCEPTION 'idem: proposal % is already %', OLD.proposal_id, OLD.state
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.effective_at IS DISTINCT FROM OLD.effective_at AND NOT (OLD.state = 'PENDING' AND NEW.state = 'APPROVED') THEN
    RAISE EXCEPTION 'idem: proposal % takes effect when it was approved to', OLD.proposal_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.state = 'EXPIRED' AND NEW.expires_at > now() THEN
    RAISE EXCEPTION 'idem: proposal % has not expired yet', NEW.proposal_id USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.state = 'APPROVED' THEN
    IF NEW.kind <> 'control_change' THEN
      RAISE EXCEPTION 'idem: only a control change waits before it takes effect' USING ERRCODE = 'check_violation';
    END IF;
    SELECT g.loosening_delay_seconds INTO delay_seconds FROM public.tenant_governance g
     WHERE g.tenant_id = NEW.tenant_id;
    IF NEW.effective_at IS NULL OR NEW.effective_at < now() + make_interval(secs => coalesce(delay_seconds, 86400)) THEN
      RAISE EXCEPTION 'idem: a control change takes effect only after the tenant''s delay' USING ERRCODE = 'check_violation';
    END IF;
  END IF;
  IF NEW.state = 'EXECUTED' AND NEW.kind = 'control_change'
     AND (OLD.state <> 'APPROVED' OR NEW.effective_at > now()) THEN
    RAISE EXCEPTION 'idem: control change % is not due yet', NEW.proposal_id USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.state IN ('EXECUTED', 'APPROVED') THEN
    IF OLD.state = 'PENDING' AND NEW.expires_at <= now() THEN
      RAISE EXCEPTION 'idem: proposal % has expired', NEW.proposal_id USING ERRCODE = 'check_violation';
    END IF;
    SELECT count(*) INTO approvals FROM public.proposal_decisions d
      JOIN public.staff_users s ON s.tenant_id = d.tenant_id AND d.approver = 'staff:' || s.user_id::text
     WHERE d.tenant_id = NEW.tenant_id AND d.proposal_id = NEW.proposal_id
       AND d.decision = 'approve' AND d.payload_hash = NEW.payload_hash AND d.approver <> NEW.proposed_by
       AND s.disabled_at IS NULL
       AND (s.role = 'admin' OR (s.role = 'approver' AND NEW.kind <> 'control_change'));
    IF approvals < NEW.approvals_required THEN
      RAISE EXCEPTION 'idem: proposal % has % of % approvals', NEW.proposal_id, approvals, NEW.approvals_required
        USING ERRCODE = 'check_violation';
    END IF;
  END IF;
  RETURN NEW;
END $function$
