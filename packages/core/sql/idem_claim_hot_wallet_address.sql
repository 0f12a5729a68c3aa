-- Trigger hot_wallets_claim_address: each new hot wallet claims its (network, address) in
-- hot_wallet_addresses, whose primary key refuses a second claim, from any tenant: one address is
-- one nonce sequence, so two tenants' rows for it would allocate the same nonces. Runs as the role
-- that inserts the wallet, which is the deployment's own (the application role may not add one).
CREATE OR REPLACE FUNCTION public.idem_claim_hot_wallet_address()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  INSERT INTO public.hot_wallet_addresses (network, address, tenant_id)
  VALUES (NEW.network, NEW.address, NEW.tenant_id);
  RETURN NULL;
END $function$
