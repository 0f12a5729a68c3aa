-- A correct password: deletes the account's sign-in counter and gives back the attempt taken from
-- the address, so colleagues behind one address are not locked out by signing in. SECURITY
-- DEFINER as idem_throttle.
CREATE OR REPLACE FUNCTION public.idem_sign_in_succeeded(p_tenant uuid, p_account text, p_address text)
 RETURNS void
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
  DELETE FROM public.sign_in_failures WHERE tenant_id = p_tenant AND account_hash = p_account;
  UPDATE public.sign_in_address_failures SET failures = failures - 1
   WHERE address_hash = p_address AND failures > 0 AND expires_at > now();
$function$

