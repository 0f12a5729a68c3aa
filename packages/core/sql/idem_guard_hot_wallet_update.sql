-- Trigger hot_wallets_guard: a hot wallet's next nonce only grows (a nonce is never handed out
-- twice) and its address never changes.
CREATE OR REPLACE FUNCTION public.idem_guard_hot_wallet_update()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF NEW.next_nonce < OLD.next_nonce OR NEW.address IS DISTINCT FROM OLD.address THEN
    RAISE EXCEPTION 'idem: hot wallet % nonce cannot go back and its address cannot change', OLD.address
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $function$

