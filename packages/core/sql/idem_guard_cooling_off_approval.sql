-- Triggers approvals_cooling_off and proposal_decisions_cooling_off: an approval by a staff member
-- still in their cooling-off period (staff_users.approvals_from in the future) is refused, so it
-- can never count even if a path forgot the check the application makes first.
CREATE OR REPLACE FUNCTION public.idem_guard_cooling_off_approval()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF NEW.decision = 'approve' AND NEW.approver ~ '^staff:[0-9a-f-]{36}$' AND EXISTS (
    SELECT 1 FROM public.staff_users u
     WHERE u.tenant_id = NEW.tenant_id
       AND u.user_id = substring(NEW.approver from 7)::uuid
       AND u.approvals_from > now()
  ) THEN
    RAISE EXCEPTION 'idem: % is still in their cooling-off period and cannot approve', NEW.approver
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $function$
