-- Trigger approvals_passkey (BEFORE INSERT; docs/GOVERNANCE.md "Passkeys"): a withdrawal approval
-- by a member who has an active passkey, or in a tenant that requires passkeys
-- (tenant_governance.require_passkey_approvals), carries a passkey assertion; and an assertion,
-- whatever the decision, names an active passkey of that same member and holds its parts. The
-- database cannot check the signature (verifyApprovalAssertions and the signer do); it refuses the
-- rows no device was even asked for, whichever path writes them.
CREATE OR REPLACE FUNCTION public.idem_guard_approval_passkey()
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
  IF NEW.decision = 'approve' AND (
       EXISTS (SELECT 1 FROM public.staff_passkeys k
                WHERE k.tenant_id = NEW.tenant_id AND k.user_id = member
                  AND k.activated_at IS NOT NULL AND k.revoked_at IS NULL)
       OR EXISTS (SELECT 1 FROM public.tenant_governance g
                   WHERE g.tenant_id = NEW.tenant_id AND g.require_passkey_approvals)) THEN
    RAISE EXCEPTION 'idem: an approval by % needs their passkey assertion', NEW.approver
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $function$
