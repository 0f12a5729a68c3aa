-- What drizzle-kit cannot emit for the staff and web-session tables (see 0001 and 0003 for the
-- pattern): FORCE ROW LEVEL SECURITY and narrow grants to idem_app.
ALTER TABLE staff_users FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE web_sessions FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE customer_session_links FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE tenant_branding FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
-- Staff are created and disabled, never deleted: their ids stay meaningful in operation history.
GRANT SELECT, INSERT ON staff_users TO idem_app;
--> statement-breakpoint
GRANT UPDATE (password_hash, disabled_at) ON staff_users TO idem_app;
--> statement-breakpoint
-- A session can only be created and ended (revoked); its subject and expiry never change.
GRANT SELECT, INSERT ON web_sessions TO idem_app;
--> statement-breakpoint
GRANT UPDATE (revoked_at) ON web_sessions TO idem_app;
--> statement-breakpoint
-- A link can only be used, once (the conditional UPDATE on used_at is the once).
GRANT SELECT, INSERT ON customer_session_links TO idem_app;
--> statement-breakpoint
GRANT UPDATE (used_at) ON customer_session_links TO idem_app;
--> statement-breakpoint
GRANT SELECT, INSERT ON tenant_branding TO idem_app;
--> statement-breakpoint
GRANT UPDATE (display_name, logo_url, primary_color, updated_at, updated_by) ON tenant_branding TO idem_app;
--> statement-breakpoint
CREATE TRIGGER staff_users_no_delete BEFORE DELETE ON staff_users
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
