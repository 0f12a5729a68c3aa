CREATE TABLE "reconciliation_run_figures" (
	"tenant_id" uuid NOT NULL,
	"run_id" uuid NOT NULL,
	"place" text NOT NULL,
	"asset_code" text NOT NULL,
	"liabilities_available_minor" numeric(78, 0) NOT NULL,
	"liabilities_held_minor" numeric(78, 0) NOT NULL,
	"custody_control_minor" numeric(78, 0) NOT NULL,
	"fee_expense_minor" numeric(78, 0) NOT NULL,
	"in_flight_withdrawals_minor" numeric(78, 0) NOT NULL,
	"expected_minor" numeric(78, 0) NOT NULL,
	"observed_minor" numeric(78, 0),
	"explained_minor" numeric(78, 0) NOT NULL,
	"unexplained_minor" numeric(78, 0),
	"explanations" jsonb NOT NULL,
	"pinned_block" bigint,
	"reported_at" timestamp with time zone,
	"account_tenants" integer DEFAULT 1 NOT NULL,
	"break_id" uuid,
	CONSTRAINT "reconciliation_run_figures_tenant_id_run_id_place_asset_code_pk" PRIMARY KEY("tenant_id","run_id","place","asset_code"),
	CONSTRAINT "reconciliation_run_figures_place_shape" CHECK ("reconciliation_run_figures"."place" ~ '^(chain|custodian):[a-z0-9_-]{1,64}$'),
	CONSTRAINT "reconciliation_run_figures_observation_shape" CHECK (("reconciliation_run_figures"."observed_minor" is null) = ("reconciliation_run_figures"."unexplained_minor" is null)
          and ("reconciliation_run_figures"."place" not like 'chain:%' or "reconciliation_run_figures"."observed_minor" is null or "reconciliation_run_figures"."pinned_block" is not null)
          and ("reconciliation_run_figures"."place" not like 'custodian:%' or "reconciliation_run_figures"."observed_minor" is null or "reconciliation_run_figures"."reported_at" is not null))
);
--> statement-breakpoint
ALTER TABLE "reconciliation_run_figures" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "reconciliation_runs" (
	"tenant_id" uuid NOT NULL,
	"run_id" uuid NOT NULL,
	"ran_by" text NOT NULL,
	"trigger" text NOT NULL,
	"inputs" jsonb NOT NULL,
	"status" text DEFAULT 'running' NOT NULL,
	"result" text,
	"breaks_opened" integer DEFAULT 0 NOT NULL,
	"note" text,
	"started_at" timestamp with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp with time zone,
	CONSTRAINT "reconciliation_runs_tenant_id_run_id_pk" PRIMARY KEY("tenant_id","run_id"),
	CONSTRAINT "reconciliation_runs_trigger_known" CHECK ("reconciliation_runs"."trigger" in ('schedule', 'on_demand')),
	CONSTRAINT "reconciliation_runs_status_known" CHECK ("reconciliation_runs"."status" in ('running', 'finished', 'failed')),
	CONSTRAINT "reconciliation_runs_result_known" CHECK ("reconciliation_runs"."result" is null or "reconciliation_runs"."result" in ('balanced', 'explained', 'variance', 'incomplete')),
	CONSTRAINT "reconciliation_runs_finished_shape" CHECK (("reconciliation_runs"."status" = 'running') = ("reconciliation_runs"."finished_at" is null) and ("reconciliation_runs"."status" <> 'finished' or "reconciliation_runs"."result" is not null))
);
--> statement-breakpoint
ALTER TABLE "reconciliation_runs" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenants" ADD COLUMN "custodian_account" text DEFAULT 'omnibus' NOT NULL;--> statement-breakpoint
ALTER TABLE "reconciliation_run_figures" ADD CONSTRAINT "reconciliation_run_figures_tenant_id_run_id_reconciliation_runs_tenant_id_run_id_fk" FOREIGN KEY ("tenant_id","run_id") REFERENCES "public"."reconciliation_runs"("tenant_id","run_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "reconciliation_runs_started" ON "reconciliation_runs" USING btree ("tenant_id","started_at");--> statement-breakpoint
ALTER TABLE "tenants" ADD CONSTRAINT "tenants_custodian_account_shape" CHECK ("tenants"."custodian_account" ~ '^[a-z0-9_-]{1,64}$');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "reconciliation_run_figures" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "reconciliation_runs" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);