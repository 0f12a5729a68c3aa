-- What drizzle-kit cannot emit for proposals (see 0001 for the pattern): FORCE ROW LEVEL SECURITY,
-- narrow grants, and the four-eyes rules held by the database itself, whatever the application does.
ALTER TABLE proposals FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE proposal_decisions FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
GRANT SELECT, INSERT ON proposals, proposal_decisions TO idem_app;
--> statement-breakpoint
-- Only the outcome of a proposal ever changes; what was proposed and shown never does.
GRANT UPDATE (state, result, decided_at) ON proposals TO idem_app;
--> statement-breakpoint
CREATE TRIGGER proposal_decisions_append_only BEFORE UPDATE OR DELETE ON proposal_decisions
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
CREATE TRIGGER proposals_no_delete BEFORE DELETE ON proposals
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
-- A proposal leaves PENDING once, and becomes EXECUTED only with enough distinct approvals, none of
-- them the proposer's, each bound to the stored hash.
CREATE FUNCTION idem_guard_proposal_update() RETURNS trigger LANGUAGE plpgsql
  SET search_path = pg_catalog, public, pg_temp AS $$
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
END $$;
--> statement-breakpoint
CREATE TRIGGER proposals_guard_update BEFORE UPDATE ON proposals
  FOR EACH ROW EXECUTE FUNCTION idem_guard_proposal_update();
--> statement-breakpoint
-- The proposer never decides on their own proposal, and a decision binds the stored hash.
CREATE FUNCTION idem_guard_proposal_decision() RETURNS trigger LANGUAGE plpgsql
  SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
  p record;
BEGIN
  SELECT proposed_by, payload_hash, state INTO p FROM public.proposals
   WHERE tenant_id = NEW.tenant_id AND proposal_id = NEW.proposal_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'idem: no proposal %', NEW.proposal_id USING ERRCODE = 'foreign_key_violation';
  END IF;
  IF p.proposed_by = NEW.approver THEN
    RAISE EXCEPTION 'idem: the proposer cannot decide on their own proposal' USING ERRCODE = 'check_violation';
  END IF;
  IF p.payload_hash <> NEW.payload_hash THEN
    RAISE EXCEPTION 'idem: a decision must bind the stored proposal hash' USING ERRCODE = 'check_violation';
  END IF;
  IF p.state <> 'PENDING' THEN
    RAISE EXCEPTION 'idem: proposal % is already %', NEW.proposal_id, p.state
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $$;
--> statement-breakpoint
CREATE TRIGGER proposal_decisions_guard_insert BEFORE INSERT ON proposal_decisions
  FOR EACH ROW EXECUTE FUNCTION idem_guard_proposal_decision();
