-- Takes one sign-in attempt for (tenant, account) from an address before the password is checked,
-- so concurrent guesses cannot all pass: answers the milliseconds to wait when either counter is
-- spent, else 0. Locks account then address so two attempts cannot deadlock, and deletes at most
-- 50 finished windows without waiting. SECURITY DEFINER as idem_throttle.
CREATE OR REPLACE FUNCTION public.idem_sign_in_take(p_tenant uuid, p_account text, p_address text)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
  window_length constant interval := interval '15 minutes';
  account_max constant integer := 10;
  address_max constant integer := 100;
  account_failures integer;
  account_expires timestamptz;
  address_failures integer;
  address_expires timestamptz;
  wait_until timestamptz;
BEGIN
  IF p_tenant IS NULL OR p_account !~ '^[0-9a-f]{64}$' OR p_address !~ '^[0-9a-f]{64}$' THEN
    RAISE EXCEPTION 'idem: sign-in throttle keys are a tenant and two SHA-256 hex digests'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  INSERT INTO public.sign_in_failures AS f (tenant_id, account_hash, failures, expires_at)
    VALUES (p_tenant, p_account, 0, now() + window_length)
  ON CONFLICT (tenant_id, account_hash) DO UPDATE
    SET failures = CASE WHEN f.expires_at <= now() THEN 0 ELSE f.failures END,
        expires_at = CASE WHEN f.expires_at <= now() THEN excluded.expires_at ELSE f.expires_at END
  RETURNING f.failures, f.expires_at INTO account_failures, account_expires;
  INSERT INTO public.sign_in_address_failures AS f (address_hash, failures, expires_at)
    VALUES (p_address, 0, now() + window_length)
  ON CONFLICT (address_hash) DO UPDATE
    SET failures = CASE WHEN f.expires_at <= now() THEN 0 ELSE f.failures END,
        expires_at = CASE WHEN f.expires_at <= now() THEN excluded.expires_at ELSE f.expires_at END
  RETURNING f.failures, f.expires_at INTO address_failures, address_expires;

  IF account_failures >= account_max THEN wait_until := account_expires; END IF;
  IF address_failures >= address_max THEN wait_until := greatest(wait_until, address_expires); END IF;
  IF wait_until IS NULL THEN
    UPDATE public.sign_in_failures SET failures = failures + 1
     WHERE tenant_id = p_tenant AND account_hash = p_account;
    UPDATE public.sign_in_address_failures SET failures = failures + 1
     WHERE address_hash = p_address;
  END IF;

  DELETE FROM public.sign_in_failures f
   USING (SELECT e.tenant_id, e.account_hash FROM public.sign_in_failures e
           WHERE e.expires_at <= now() ORDER BY e.expires_at LIMIT 50
             FOR UPDATE SKIP LOCKED) old
   WHERE f.tenant_id = old.tenant_id AND f.account_hash = old.account_hash AND f.expires_at <= now();
  DELETE FROM public.sign_in_address_failures f
   USING (SELECT e.address_hash FROM public.sign_in_address_failures e
           WHERE e.expires_at <= now() ORDER BY e.expires_at LIMIT 50
             FOR UPDATE SKIP LOCKED) old
   WHERE f.address_hash = old.address_hash AND f.expires_at <= now();

  IF wait_until IS NULL THEN RETURN 0; END IF;
  RETURN greatest(1, ceil(extract(epoch FROM wait_until - now()) * 1000))::integer;
END $function$

