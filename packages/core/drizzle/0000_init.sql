CREATE TABLE "balances" (
	"tenant_id" uuid NOT NULL,
	"account_ref" text NOT NULL,
	"asset_code" text NOT NULL,
	"available" numeric(78, 0) DEFAULT '0' NOT NULL,
	"held" numeric(78, 0) DEFAULT '0' NOT NULL,
	"version" bigint DEFAULT 0 NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "balances_tenant_id_account_ref_asset_code_pk" PRIMARY KEY("tenant_id","account_ref","asset_code"),
	CONSTRAINT "balances_available_non_negative" CHECK ("balances"."available" >= 0),
	CONSTRAINT "balances_held_non_negative" CHECK ("balances"."held" >= 0)
);
--> statement-breakpoint
ALTER TABLE "balances" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "journal_entries" (
	"tenant_id" uuid NOT NULL,
	"entry_id" uuid NOT NULL,
	"operation_id" uuid NOT NULL,
	"kind" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "journal_entries_tenant_id_entry_id_pk" PRIMARY KEY("tenant_id","entry_id")
);
--> statement-breakpoint
ALTER TABLE "journal_entries" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "postings" (
	"tenant_id" uuid NOT NULL,
	"entry_id" uuid NOT NULL,
	"posting_no" integer NOT NULL,
	"account" text NOT NULL,
	"bucket" text NOT NULL,
	"asset_code" text NOT NULL,
	"amount" numeric(78, 0) NOT NULL,
	CONSTRAINT "postings_tenant_id_entry_id_posting_no_pk" PRIMARY KEY("tenant_id","entry_id","posting_no"),
	CONSTRAINT "postings_amount_non_zero" CHECK ("postings"."amount" <> 0),
	CONSTRAINT "postings_bucket_known" CHECK ("postings"."bucket" in ('available', 'held', 'control')),
	CONSTRAINT "postings_system_accounts_use_control" CHECK (("postings"."account" like '@%') = ("postings"."bucket" = 'control'))
);
--> statement-breakpoint
ALTER TABLE "postings" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "operation_transitions" (
	"tenant_id" uuid NOT NULL,
	"operation_id" uuid NOT NULL,
	"seq" bigint NOT NULL,
	"from_state" text,
	"to_state" text NOT NULL,
	"actor" text NOT NULL,
	"reason" text NOT NULL,
	"evidence" jsonb,
	"lease_generation" bigint,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "operation_transitions_tenant_id_operation_id_seq_pk" PRIMARY KEY("tenant_id","operation_id","seq")
);
--> statement-breakpoint
ALTER TABLE "operation_transitions" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "operations" (
	"tenant_id" uuid NOT NULL,
	"operation_id" uuid NOT NULL,
	"kind" text NOT NULL,
	"idempotency_key" text NOT NULL,
	"reference" text NOT NULL,
	"account_ref" text NOT NULL,
	"asset_code" text NOT NULL,
	"network" text NOT NULL,
	"destination" text,
	"memo" text,
	"amount_minor" numeric(78, 0) NOT NULL,
	"fee_cap_minor" numeric(78, 0),
	"policy_version" integer NOT NULL,
	"payload_hash" text NOT NULL,
	"state" text NOT NULL,
	"rejection_code" text,
	"lease_owner" text,
	"lease_expires_at" timestamp with time zone,
	"lease_generation" bigint DEFAULT 0 NOT NULL,
	"signed_artifact" text,
	"tx_hash" text,
	"owner" text,
	"version" bigint DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"settled_at" timestamp with time zone,
	"key_expired_at" timestamp with time zone,
	CONSTRAINT "operations_tenant_id_operation_id_pk" PRIMARY KEY("tenant_id","operation_id"),
	CONSTRAINT "operations_tenant_key" UNIQUE("tenant_id","idempotency_key"),
	CONSTRAINT "operations_tenant_kind_reference" UNIQUE("tenant_id","kind","reference"),
	CONSTRAINT "operations_kind_known" CHECK ("operations"."kind" in ('withdrawal', 'deposit', 'adjustment')),
	CONSTRAINT "operations_state_known" CHECK ("operations"."state" in ('REQUESTED','APPROVED','REJECTED','SIGNING','SIGNED','BROADCAST','UNKNOWN','CONFIRMED','VERIFIED_NOT_SENT','FAILED_TERMINAL')),
	CONSTRAINT "operations_amount_sign" CHECK ("operations"."amount_minor" > 0 or ("operations"."kind" = 'adjustment' and "operations"."amount_minor" <> 0)),
	CONSTRAINT "operations_fee_cap_positive" CHECK ("operations"."fee_cap_minor" is null or "operations"."fee_cap_minor" > 0)
);
--> statement-breakpoint
ALTER TABLE "operations" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "work_items" (
	"tenant_id" uuid NOT NULL,
	"work_id" uuid NOT NULL,
	"topic" text NOT NULL,
	"operation_id" uuid,
	"payload" jsonb NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"available_at" timestamp with time zone DEFAULT now() NOT NULL,
	"locked_by" text,
	"locked_until" timestamp with time zone,
	"last_error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "work_items_tenant_id_work_id_pk" PRIMARY KEY("tenant_id","work_id")
);
--> statement-breakpoint
ALTER TABLE "work_items" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "assets" (
	"tenant_id" uuid NOT NULL,
	"code" text NOT NULL,
	"network" text NOT NULL,
	"decimals" integer NOT NULL,
	"confirmations" integer NOT NULL,
	"contract_address" text,
	CONSTRAINT "assets_tenant_id_code_pk" PRIMARY KEY("tenant_id","code"),
	CONSTRAINT "assets_decimals_range" CHECK ("assets"."decimals" between 0 and 36),
	CONSTRAINT "assets_confirmations_positive" CHECK ("assets"."confirmations" >= 1),
	CONSTRAINT "assets_network_known" CHECK ("assets"."network" in ('bitcoin', 'ethereum'))
);
--> statement-breakpoint
ALTER TABLE "assets" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "tenants" (
	"tenant_id" uuid NOT NULL,
	"name" text NOT NULL,
	"policy_version" integer DEFAULT 1 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tenants_tenant_id_pk" PRIMARY KEY("tenant_id")
);
--> statement-breakpoint
ALTER TABLE "tenants" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "balances" ADD CONSTRAINT "balances_tenant_id_asset_code_assets_tenant_id_code_fk" FOREIGN KEY ("tenant_id","asset_code") REFERENCES "public"."assets"("tenant_id","code") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "operations_tenant_state" ON "operations" USING btree ("tenant_id","state","updated_at");--> statement-breakpoint
CREATE INDEX "operations_state_lease" ON "operations" USING btree ("state","lease_expires_at");--> statement-breakpoint
CREATE INDEX "work_items_pending" ON "work_items" USING btree ("status","available_at");--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "balances" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "journal_entries" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "postings" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "operation_transitions" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "operations" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "work_items" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "assets" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "tenants" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);