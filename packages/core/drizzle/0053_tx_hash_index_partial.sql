DROP INDEX "operations_tx_hash";--> statement-breakpoint
CREATE INDEX "operations_tx_hash" ON "operations" USING btree ("tenant_id","tx_hash") WHERE tx_hash is not null;