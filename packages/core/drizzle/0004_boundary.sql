CREATE TABLE "approvals" (
	"tenant_id" uuid NOT NULL,
	"operation_id" uuid NOT NULL,
	"approver" text NOT NULL,
	"payload_hash" text NOT NULL,
	"decision" text NOT NULL,
	"reason" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "approvals_tenant_id_operation_id_approver_pk" PRIMARY KEY("tenant_id","operation_id","approver"),
	CONSTRAINT "approvals_decision_known" CHECK ("approvals"."decision" in ('approve', 'reject'))
);
--> statement-breakpoint
ALTER TABLE "approvals" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "hot_wallets" (
	"tenant_id" uuid NOT NULL,
	"network" text NOT NULL,
	"address" text NOT NULL,
	"key_ref" text NOT NULL,
	"next_nonce" bigint DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "hot_wallets_tenant_id_network_pk" PRIMARY KEY("tenant_id","network"),
	CONSTRAINT "hot_wallets_nonce_non_negative" CHECK ("hot_wallets"."next_nonce" >= 0)
);
--> statement-breakpoint
ALTER TABLE "hot_wallets" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "reconciliation_breaks" (
	"tenant_id" uuid NOT NULL,
	"break_id" uuid NOT NULL,
	"break_class" text NOT NULL,
	"subject" text NOT NULL,
	"asset_code" text,
	"ledger_amount_minor" numeric(78, 0),
	"observed_amount_minor" numeric(78, 0),
	"details" jsonb NOT NULL,
	"owner" text NOT NULL,
	"status" text DEFAULT 'open' NOT NULL,
	"opened_at" timestamp with time zone DEFAULT now() NOT NULL,
	"closed_at" timestamp with time zone,
	"closed_by" text,
	"closure_evidence" jsonb,
	CONSTRAINT "reconciliation_breaks_tenant_id_break_id_pk" PRIMARY KEY("tenant_id","break_id"),
	CONSTRAINT "reconciliation_breaks_class_known" CHECK ("reconciliation_breaks"."break_class" in ('timing', 'unknown_operation', 'genuine_variance')),
	CONSTRAINT "reconciliation_breaks_status_known" CHECK ("reconciliation_breaks"."status" in ('open', 'closed')),
	CONSTRAINT "reconciliation_breaks_closed_with_evidence" CHECK (("reconciliation_breaks"."status" = 'open') = ("reconciliation_breaks"."closed_at" is null) and ("reconciliation_breaks"."status" = 'open' or "reconciliation_breaks"."closure_evidence" is not null))
);
--> statement-breakpoint
ALTER TABLE "reconciliation_breaks" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "risk_policies" (
	"tenant_id" uuid NOT NULL,
	"asset_code" text NOT NULL,
	"auto_approve_max_minor" numeric(78, 0) DEFAULT '0' NOT NULL,
	"four_eyes_min_minor" numeric(78, 0) NOT NULL,
	"velocity_max_per_hour" integer DEFAULT 10 NOT NULL,
	"similar_window_minutes" integer DEFAULT 60 NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "risk_policies_tenant_id_asset_code_pk" PRIMARY KEY("tenant_id","asset_code")
);
--> statement-breakpoint
ALTER TABLE "risk_policies" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "operations" DROP CONSTRAINT "operations_state_known";--> statement-breakpoint
ALTER TABLE "operations" ADD COLUMN "chain_nonce" bigint;--> statement-breakpoint
ALTER TABLE "operations" ADD COLUMN "provider_ref" text;--> statement-breakpoint
ALTER TABLE "operations" ADD COLUMN "risk_flags" jsonb;--> statement-breakpoint
ALTER TABLE "operations" ADD COLUMN "approvals_required" integer;--> statement-breakpoint
CREATE UNIQUE INDEX "reconciliation_breaks_one_open_per_subject" ON "reconciliation_breaks" USING btree ("tenant_id","subject") WHERE "reconciliation_breaks"."status" = 'open';--> statement-breakpoint
CREATE INDEX "reconciliation_breaks_status" ON "reconciliation_breaks" USING btree ("tenant_id","status","opened_at");--> statement-breakpoint
ALTER TABLE "operations" ADD CONSTRAINT "operations_state_known" CHECK ("operations"."state" in ('REQUESTED','APPROVED','REJECTED','SIGNING','SIGNED','BROADCAST','UNKNOWN','CONFIRMED','VERIFIED_NOT_SENT','FAILED_TERMINAL','REVERSED'));--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "approvals" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "hot_wallets" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "reconciliation_breaks" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "risk_policies" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);