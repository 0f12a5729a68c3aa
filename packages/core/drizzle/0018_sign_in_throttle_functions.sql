-- I11-F7: the sign-in guessing limit, shared by every server process. The counters span tenants
-- (the per-address one) and must be cleaned across tenants, so the application role gets no
-- privilege on the tables at all: only EXECUTE on two SECURITY DEFINER functions, owned by a
-- NOLOGIN role (idem_throttle) that may touch these two tables and nothing else (the pattern of
-- idem_metrics in 0003). Limits live here, so no caller can pick its own window or count.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'idem_throttle') THEN
    CREATE ROLE idem_throttle NOLOGIN NOSUPERUSER NOBYPASSRLS;
  END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;
--> statement-breakpoint
GRANT USAGE ON SCHEMA public TO idem_throttle;
--> statement-breakpoint
REVOKE ALL ON sign_in_failures, sign_in_address_failures FROM idem_app;
--> statement-breakpoint
GRANT SELECT, INSERT, UPDATE, DELETE ON sign_in_failures, sign_in_address_failures TO idem_throttle;
--> statement-breakpoint
ALTER TABLE sign_in_failures FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE sign_in_address_failures FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
DROP POLICY IF EXISTS sign_in_throttle ON sign_in_failures;
--> statement-breakpoint
CREATE POLICY sign_in_throttle ON sign_in_failures AS PERMISSIVE FOR ALL TO idem_throttle
  USING (true) WITH CHECK (true);
--> statement-breakpoint
DROP POLICY IF EXISTS sign_in_throttle ON sign_in_address_failures;
--> statement-breakpoint
CREATE POLICY sign_in_throttle ON sign_in_address_failures AS PERMISSIVE FOR ALL TO idem_throttle
  USING (true) WITH CHECK (true);
--> statement-breakpoint

-- Takes one sign-in attempt for (tenant, account hash) from (address hash): answers the
-- milliseconds to wait when either counter is spent (nothing counted), else 0 with the attempt
-- counted against both (before the password is checked, so concurrent guesses cannot all pass a
-- check made before any of them failed). A window runs 15 minutes from its first attempt and is
-- restarted in place once over: no counter is ever reset early. Rows are locked account first,
-- address second, in every caller, so two attempts cannot deadlock; the clean-up comes last and
-- skips locked rows, so it never waits. It deletes at most 50 rows whose window is over (each call
-- adds at most 2), never a live one. Names are schema-qualified and search_path pinned, so a
-- temporary table cannot stand in for a counter.
CREATE OR REPLACE FUNCTION public.idem_sign_in_take(p_tenant uuid, p_account text, p_address text)
  RETURNS integer
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
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
END $$;
--> statement-breakpoint
ALTER FUNCTION public.idem_sign_in_take(uuid, text, text) OWNER TO idem_throttle;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.idem_sign_in_take(uuid, text, text) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.idem_sign_in_take(uuid, text, text) TO idem_app;
--> statement-breakpoint

-- A correct password: the account's counter is deleted (that one row only) and the attempt taken
-- from the address is given back, so colleagues behind one address are not locked out by
-- signing in. Failures already counted against the address stay until its window ends.
CREATE OR REPLACE FUNCTION public.idem_sign_in_succeeded(p_tenant uuid, p_account text, p_address text)
  RETURNS void
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  DELETE FROM public.sign_in_failures WHERE tenant_id = p_tenant AND account_hash = p_account;
  UPDATE public.sign_in_address_failures SET failures = failures - 1
   WHERE address_hash = p_address AND failures > 0 AND expires_at > now();
$$;
--> statement-breakpoint
ALTER FUNCTION public.idem_sign_in_succeeded(uuid, text, text) OWNER TO idem_throttle;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.idem_sign_in_succeeded(uuid, text, text) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.idem_sign_in_succeeded(uuid, text, text) TO idem_app;
