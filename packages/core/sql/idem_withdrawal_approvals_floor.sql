-- The fewest staff approvals a withdrawal needs by the rules in force, as the database computes them,
-- so that whoever holds the application's login cannot claim the risk review found none:
-- 1 with no policy for the asset or above its auto-approve limit, 2 from its four-eyes threshold,
-- and for a withdrawal a staff member requested 1 when at the account holder's request, else 2
-- (I11-F3). The review may ask more (velocity, a similar recent withdrawal); never fewer. Read by
-- idem_guard_operation_state when the review records its count and when a withdrawal is approved.
CREATE OR REPLACE FUNCTION public.idem_withdrawal_approvals_floor(p_tenant_id uuid, p_operation_id uuid)
 RETURNS integer
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
  op record;
  policy record;
  requester text;
  on_behalf boolean;
  floor integer := 0;
BEGIN
  SELECT o.asset_code, o.amount_minor INTO op FROM public.operations o
   WHERE o.tenant_id = p_tenant_id AND o.operation_id = p_operation_id;
  IF NOT FOUND THEN
    RETURN 2147483647;
  END IF;
  SELECT r.auto_approve_max_minor, r.four_eyes_min_minor INTO policy FROM public.risk_policies r
   WHERE r.tenant_id = p_tenant_id AND r.asset_code = op.asset_code;
  IF NOT FOUND THEN
    floor := 1;
  ELSE
    IF op.amount_minor > policy.auto_approve_max_minor THEN
      floor := 1;
    END IF;
    IF op.amount_minor >= policy.four_eyes_min_minor THEN
      floor := 2;
    END IF;
  END IF;
  SELECT t.actor INTO requester FROM public.operation_transitions t
   WHERE t.tenant_id = p_tenant_id AND t.operation_id = p_operation_id AND t.from_state IS NULL
   ORDER BY t.seq LIMIT 1;
  IF requester IS NULL OR requester LIKE 'staff:%' THEN
    SELECT EXISTS (
      SELECT 1 FROM public.operation_transitions t
       WHERE t.tenant_id = p_tenant_id AND t.operation_id = p_operation_id AND t.actor = requester
         AND coalesce(t.evidence -> 'staffInitiated' -> 'onBehalfOf' ->> 'customerRequestRef', '') <> ''
    ) INTO on_behalf;
    floor := greatest(floor, CASE WHEN on_behalf THEN 1 ELSE 2 END);
  END IF;
  RETURN floor;
END $function$
