CREATE TABLE "hot_wallet_addresses" (
	"network" text NOT NULL,
	"address" text NOT NULL,
	"tenant_id" uuid NOT NULL,
	CONSTRAINT "hot_wallet_addresses_network_address_pk" PRIMARY KEY("network","address")
);
--> statement-breakpoint
ALTER TABLE "hot_wallet_addresses" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE INDEX "journal_entries_operation" ON "journal_entries" USING btree ("tenant_id","operation_id");--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "hot_wallet_addresses" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);