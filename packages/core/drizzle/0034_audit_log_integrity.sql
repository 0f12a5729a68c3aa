-- The staff audit log (issue 14) is append-only, for the application and for anyone holding its
-- database login: it may insert and read; every update, delete and truncate is refused.
ALTER TABLE audit_log FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
GRANT SELECT, INSERT ON audit_log TO idem_app;
--> statement-breakpoint
GRANT USAGE ON SEQUENCE audit_log_sequence_seq TO idem_app;
--> statement-breakpoint
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
  FOR EACH STATEMENT EXECUTE FUNCTION idem_refuse_change();
