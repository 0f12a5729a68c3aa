-- Trigger proposal_decisions_passkey (BEFORE INSERT; docs/GOVERNANCE.md "Passkeys"): a proposal
-- decision, approval or rejection, by a member who has an active passkey carries a passkey
-- assertion; so does an approval in a tenant that requires passkeys
-- (tenant_governance.require_passkey_approvals), but for a control change, which stays decidable
-- without one so a tenant can still activate passkeys and turn the requirement off. An assertion
-- names an active passkey of that same member and holds its parts. The database cannot check the
-- signature (verifyProposalAssertions and the signer do); it refuses the rows no device was even
-- asked for, whichever path writes them.
CREATE OR REPLACE FUNCTION public.idem_guard_proposal_decision_passkey()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
  member uuid;
BEGIN
  IF NEW.approver ~ '^staff:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
    member := substring(NEW.approver from 7)::uuid;
  END IF;
  IF NEW.passkey_assertion IS NOT NULL THEN
    IF jsonb_typeof(NEW.passkey_assertion -> 'credentialId') IS DISTINCT FROM 'string'
       OR jsonb_typeof(NEW.passkey_assertion -> 'authenticatorData') IS DISTINCT FROM 'string'
       OR jsonb_typeof(NEW.passkey_assertion -> 'clientDataJSON') IS DISTINCT FROM 'string'
       OR jsonb_typeof(NEW.passkey_assertion -> 'signature') IS DISTINCT FROM 'string'
       OR NOT EXISTS (
         SELECT 1 FROM public.staff_passkeys k
          WHERE k.tenant_id = NEW.tenant_id AND k.user_id = member
            AND k.credential_id = NEW.passkey_assertion ->> 'credentialId'
            AND k.activated_at IS NOT NULL AND k.revoked_at IS NULL) THEN
      RAISE EXCEPTION 'idem: the assertion of % names no active passkey of theirs', NEW.approver
        USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
  END IF;
  IF EXISTS (SELECT 1 FROM public.staff_passkeys k
              WHERE k.tenant_id = NEW.tenant_id AND k.user_id = member
                AND k.activated_at IS NOT NULL AND k.revoked_at IS NULL)
     OR (NEW.decision = 'approve'
         AND EXISTS (SELECT 1 FROM public.tenant_governance g
                      WHERE g.tenant_id = NEW.tenant_id AND g.require_passkey_approvals)
         AND EXISTS (SELECT 1 FROM public.proposals p
                      WHERE p.tenant_id = NEW.tenant_id AND p.proposal_id = NEW.proposal_id
                        AND p.kind <> 'control_change')) THEN
    RAISE EXCEPTION 'idem: a proposal decision by % needs their passkey assertion', NEW.approver
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $function$
