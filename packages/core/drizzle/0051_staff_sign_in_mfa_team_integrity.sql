-- Issue 14 (I14-SIGNIN, I14-MFA, I14-TEAM): grants on the new columns and tables, the slugs of
-- existing tenants, and the two narrow definer functions sign-in needs to find a tenant.
ALTER TABLE staff_invitations FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
GRANT SELECT, INSERT ON staff_invitations TO idem_app;
--> statement-breakpoint
GRANT UPDATE (used_at) ON staff_invitations TO idem_app;
--> statement-breakpoint
GRANT UPDATE (role, mfa_secret, mfa_pending_secret, mfa_enrolled_at, mfa_last_step, mfa_recovery_hashes,
  mfa_failures, mfa_failures_reset_at) ON staff_users TO idem_app;
--> statement-breakpoint
GRANT UPDATE (mfa_at) ON web_sessions TO idem_app;
--> statement-breakpoint
-- The directory is global: the application role may not read or write it (only the functions below).
REVOKE ALL ON tenant_slugs FROM idem_app;
--> statement-breakpoint
-- Tenants created before slugs existed get one from their name (and a piece of their id, so two
-- tenants of one name never collide).
INSERT INTO tenant_slugs (slug, tenant_id)
SELECT left(coalesce(nullif(trim(both '-' from regexp_replace(lower(t.name), '[^a-z0-9]+', '-', 'g')), ''), 'org'), 38)
       || '-' || left(replace(t.tenant_id::text, '-', ''), 8),
       t.tenant_id
FROM tenants t
ON CONFLICT DO NOTHING;
--> statement-breakpoint
-- Forced only after the backfill above (which runs outside any tenant's scope): from now on the
-- owner too writes a slug only inside its tenant's scope, as createTenant does.
ALTER TABLE tenant_slugs FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'idem_directory') THEN
    CREATE ROLE idem_directory NOLOGIN NOSUPERUSER NOBYPASSRLS;
  END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;
--> statement-breakpoint
DO $$
BEGIN
  EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM idem_directory', current_database());
END $$;
--> statement-breakpoint
GRANT USAGE ON SCHEMA public TO idem_directory;
--> statement-breakpoint
GRANT SELECT ON tenant_slugs TO idem_directory;
--> statement-breakpoint
CREATE POLICY directory_slugs ON tenant_slugs AS PERMISSIVE FOR SELECT TO idem_directory USING (true);
--> statement-breakpoint
GRANT SELECT (tenant_id, email, disabled_at) ON staff_users TO idem_directory;
--> statement-breakpoint
CREATE POLICY directory_staff_email ON staff_users AS PERMISSIVE FOR SELECT TO idem_directory USING (true);
--> statement-breakpoint
-- The tenant of an organisation slug, or nothing. Answers one id for one exact slug; it cannot list.
CREATE FUNCTION public.idem_tenant_for_slug(p_slug text) RETURNS uuid
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
  SELECT s.tenant_id FROM public.tenant_slugs s WHERE s.slug = lower(p_slug)
$$;
--> statement-breakpoint
ALTER FUNCTION public.idem_tenant_for_slug(text) OWNER TO idem_directory;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.idem_tenant_for_slug(text) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.idem_tenant_for_slug(text) TO idem_app;
--> statement-breakpoint
-- The tenants where an e-mail is an active staff member, AT MOST TWO: sign-in without a slug only
-- needs to know none, one (which) or several; it never learns more tenants than that, nor any name.
CREATE FUNCTION public.idem_staff_tenants_for_email(p_email text) RETURNS TABLE (tenant_id uuid)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
  SELECT u.tenant_id FROM public.staff_users u
  WHERE u.email = lower(trim(p_email)) AND u.disabled_at IS NULL
  ORDER BY u.tenant_id
  LIMIT 2
$$;
--> statement-breakpoint
ALTER FUNCTION public.idem_staff_tenants_for_email(text) OWNER TO idem_directory;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.idem_staff_tenants_for_email(text) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.idem_staff_tenants_for_email(text) TO idem_app;
