-- FORCE row-level security and narrow grants for outbound endpoints and the deposit watcher.
ALTER TABLE outbound_endpoints FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE deposit_addresses FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE deposit_observations FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE chain_cursors FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
GRANT SELECT, INSERT ON outbound_endpoints, deposit_addresses TO idem_app;
--> statement-breakpoint
GRANT UPDATE (disabled_at) ON outbound_endpoints TO idem_app;
--> statement-breakpoint
GRANT SELECT, INSERT ON deposit_observations TO idem_app;
--> statement-breakpoint
GRANT UPDATE (status, operation_id, updated_at) ON deposit_observations TO idem_app;
--> statement-breakpoint
GRANT SELECT, INSERT ON chain_cursors TO idem_app;
--> statement-breakpoint
GRANT UPDATE (next_block, updated_at) ON chain_cursors TO idem_app;
--> statement-breakpoint
-- An address belongs to one account for good: a reassignment would credit the wrong customer.
CREATE TRIGGER deposit_addresses_append_only BEFORE UPDATE OR DELETE ON deposit_addresses
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
CREATE TRIGGER deposit_observations_no_delete BEFORE DELETE ON deposit_observations
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
