CREATE TABLE "chain_cursors" (
	"tenant_id" uuid NOT NULL,
	"network" text NOT NULL,
	"next_block" bigint DEFAULT 0 NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "chain_cursors_tenant_id_network_pk" PRIMARY KEY("tenant_id","network")
);
--> statement-breakpoint
ALTER TABLE "chain_cursors" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "deposit_addresses" (
	"tenant_id" uuid NOT NULL,
	"network" text NOT NULL,
	"address" text NOT NULL,
	"account_ref" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "deposit_addresses_tenant_id_network_address_pk" PRIMARY KEY("tenant_id","network","address")
);
--> statement-breakpoint
ALTER TABLE "deposit_addresses" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "deposit_observations" (
	"tenant_id" uuid NOT NULL,
	"deposit_id" text NOT NULL,
	"network" text NOT NULL,
	"account_ref" text NOT NULL,
	"asset_code" text NOT NULL,
	"amount_minor" numeric(78, 0) NOT NULL,
	"block_number" bigint NOT NULL,
	"block_hash" text NOT NULL,
	"status" text DEFAULT 'seen' NOT NULL,
	"operation_id" uuid,
	"first_seen_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "deposit_observations_tenant_id_deposit_id_pk" PRIMARY KEY("tenant_id","deposit_id"),
	CONSTRAINT "deposit_observations_status_known" CHECK ("deposit_observations"."status" in ('seen', 'credited', 'orphaned', 'reversed')),
	CONSTRAINT "deposit_observations_amount_positive" CHECK ("deposit_observations"."amount_minor" > 0)
);
--> statement-breakpoint
ALTER TABLE "deposit_observations" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "outbound_endpoints" (
	"tenant_id" uuid NOT NULL,
	"endpoint_id" uuid NOT NULL,
	"url" text NOT NULL,
	"secret" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"disabled_at" timestamp with time zone,
	CONSTRAINT "outbound_endpoints_tenant_id_endpoint_id_pk" PRIMARY KEY("tenant_id","endpoint_id")
);
--> statement-breakpoint
ALTER TABLE "outbound_endpoints" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE INDEX "deposit_observations_status" ON "deposit_observations" USING btree ("tenant_id","status");--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "chain_cursors" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "deposit_addresses" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "deposit_observations" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "outbound_endpoints" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);