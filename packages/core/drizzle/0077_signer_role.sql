-- I32-SIGNER: the signer service's read-only role. The service's own login is a member of it
-- (GRANT idem_signer TO <login>): it reads what an approval covers and can write nothing, nor
-- become the application role. Row-level security binds it like every role (policies TO public
-- on app.tenant_id, which the service sets per request).
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'idem_signer') THEN
    CREATE ROLE idem_signer NOLOGIN NOSUPERUSER NOBYPASSRLS;
  END IF;
END
$$;--> statement-breakpoint
GRANT USAGE ON SCHEMA public TO idem_signer;--> statement-breakpoint
GRANT SELECT ON operations, hot_wallets, assets, proposals, approvals, signed_attempts, risk_policies TO idem_signer;
