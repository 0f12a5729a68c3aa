-- Trigger proposals_guard_update: what was proposed (payload, evidence, hash, proposer) never
-- changes; a proposal leaves PENDING once, and becomes EXECUTED only with enough distinct
-- approvals, none of them the proposer's, each bound to the stored hash.
CREATE OR REPLACE FUNCTION public.idem_guard_proposal_update()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
  approvals integer;
BEGIN
  IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id OR NEW.proposal_id IS DISTINCT FROM OLD.proposal_id
     OR NEW.kind IS DISTINCT FROM OLD.kind OR NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key
     OR NEW.target_operation_id IS DISTINCT FROM OLD.target_operation_id
     OR NEW.payload IS DISTINCT FROM OLD.payload OR NEW.evidence IS DISTINCT FROM OLD.evidence
     OR NEW.payload_hash IS DISTINCT FROM OLD.payload_hash OR NEW.proposed_by IS DISTINCT FROM OLD.proposed_by
     OR NEW.approvals_required IS DISTINCT FROM OLD.approvals_required
     OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
    RAISE EXCEPTION 'idem: proposal % is immutable; only its outcome is recorded', OLD.proposal_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF OLD.state <> 'PENDING' THEN
    RAISE EXCEPTION 'idem: proposal % is already %', OLD.proposal_id, OLD.state
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.state = 'EXECUTED' THEN
    SELECT count(*) INTO approvals FROM public.proposal_decisions d
     WHERE d.tenant_id = NEW.tenant_id AND d.proposal_id = NEW.proposal_id
       AND d.decision = 'approve' AND d.payload_hash = NEW.payload_hash AND d.approver <> NEW.proposed_by;
    IF approvals < NEW.approvals_required THEN
      RAISE EXCEPTION 'idem: proposal % has % of % approvals', NEW.proposal_id, approvals, NEW.approvals_required
        USING ERRCODE = 'check_violation';
    END IF;
  END IF;
  RETURN NEW;
END $function$

