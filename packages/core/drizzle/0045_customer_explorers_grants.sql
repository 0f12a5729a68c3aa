-- I14-LIVE: the operator's block explorer per network. Like every tenant table: RLS forced, so the
-- table owner is bound too, and the app role gets only what the screens and the CLI need. An admin
-- may remove a template (no link), so DELETE is granted; nothing else refers to these rows.
ALTER TABLE tenant_network_explorers FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
GRANT SELECT, INSERT, DELETE ON tenant_network_explorers TO idem_app;
--> statement-breakpoint
GRANT UPDATE (tx_url_template, updated_at, updated_by) ON tenant_network_explorers TO idem_app;
