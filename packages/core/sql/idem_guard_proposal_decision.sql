-- Trigger proposal_decisions_guard_insert: the proposer never decides on their own proposal, and
-- a decision binds the proposal's stored hash.
CREATE OR REPLACE FUNCTION public.idem_guard_proposal_decision()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
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
END $function$

