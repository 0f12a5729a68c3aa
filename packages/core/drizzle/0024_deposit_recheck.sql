CREATE TABLE "not_sent_observations" (
	"tenant_id" uuid NOT NULL,
	"operation_id" uuid NOT NULL,
	"nonce" integer NOT NULL,
	"consumer_tx_hash" text NOT NULL,
	"consumer_block" bigint NOT NULL,
	"pinned_block" bigint NOT NULL,
	"observed_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "not_sent_observations_tenant_id_operation_id_pk" PRIMARY KEY("tenant_id","operation_id"),
	CONSTRAINT "not_sent_observations_consumer_deep" CHECK ("not_sent_observations"."consumer_block" <= "not_sent_observations"."pinned_block")
);
--> statement-breakpoint
ALTER TABLE "not_sent_observations" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "deposit_observations" ADD COLUMN "mismatch_head" bigint;--> statement-breakpoint
ALTER TABLE "deposit_observations" ADD COLUMN "mismatch_hash" text;--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "not_sent_observations" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);