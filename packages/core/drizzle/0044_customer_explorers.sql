CREATE TABLE "tenant_network_explorers" (
	"tenant_id" uuid NOT NULL,
	"network" text NOT NULL,
	"tx_url_template" text NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_by" text NOT NULL,
	CONSTRAINT "tenant_network_explorers_tenant_id_network_pk" PRIMARY KEY("tenant_id","network"),
	CONSTRAINT "tenant_network_explorers_template" CHECK ("tenant_network_explorers"."tx_url_template" ~ '^https://[^\s]*\{txHash\}' and length("tenant_network_explorers"."tx_url_template") <= 300)
);
--> statement-breakpoint
ALTER TABLE "tenant_network_explorers" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "tenant_network_explorers" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);