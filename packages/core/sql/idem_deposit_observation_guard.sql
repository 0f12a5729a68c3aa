-- Trigger deposit_observations_guard: which way a deposit observation may move. A credited deposit
-- is only ever reversed, a reversed one is final, an orphaned one may be seen again; its identity
-- and amount never change, its block only while it is not yet reversed.
CREATE OR REPLACE FUNCTION public.idem_deposit_observation_guard()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF NEW.tenant_id <> OLD.tenant_id OR NEW.deposit_id <> OLD.deposit_id OR NEW.network <> OLD.network
     OR NEW.account_ref <> OLD.account_ref OR NEW.asset_code <> OLD.asset_code
     OR NEW.amount_minor <> OLD.amount_minor THEN
    RAISE EXCEPTION 'idem: a deposit observation''s identity and amount never change'
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.status <> OLD.status AND NOT (
       (OLD.status = 'seen' AND NEW.status IN ('credited', 'orphaned'))
    OR (OLD.status = 'orphaned' AND NEW.status = 'seen')
    OR (OLD.status = 'credited' AND NEW.status = 'reversed')) THEN
    RAISE EXCEPTION 'idem: a deposit observation cannot move from % to %', OLD.status, NEW.status
      USING ERRCODE = 'check_violation';
  END IF;
  IF OLD.status = 'reversed' AND (NEW.block_number <> OLD.block_number OR NEW.block_hash <> OLD.block_hash) THEN
    RAISE EXCEPTION 'idem: a reversed deposit observation is final'
      USING ERRCODE = 'check_violation';
  END IF;
  IF OLD.operation_id IS NOT NULL AND NEW.operation_id IS DISTINCT FROM OLD.operation_id THEN
    RAISE EXCEPTION 'idem: a deposit observation''s operation never changes'
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$function$

