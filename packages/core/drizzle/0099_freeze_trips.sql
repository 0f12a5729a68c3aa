CREATE TABLE "freeze_trips" (
	"tenant_id" uuid NOT NULL,
	"asset_code" text,
	"failures_max" integer,
	"failures_window_seconds" integer,
	"outflow_share_max_percent" integer,
	"updated_by" text NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "freeze_trips_target" UNIQUE NULLS NOT DISTINCT("tenant_id","asset_code"),
	CONSTRAINT "freeze_trips_failures_whole" CHECK (("freeze_trips"."failures_max" is null) = ("freeze_trips"."failures_window_seconds" is null)
      and ("freeze_trips"."failures_max" is null or "freeze_trips"."failures_max" >= 0)
      and ("freeze_trips"."failures_window_seconds" is null or "freeze_trips"."failures_window_seconds" between 60 and 604800)),
	CONSTRAINT "freeze_trips_outflow_share" CHECK ("freeze_trips"."outflow_share_max_percent" is null or "freeze_trips"."outflow_share_max_percent" between 1 and 100)
);
--> statement-breakpoint
ALTER TABLE "freeze_trips" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE UNIQUE INDEX "freezes_one_per_trip" ON "freezes" USING btree ("tenant_id","frozen_by") WHERE "freezes"."lifted_at" is null and "freezes"."frozen_by" like 'system:trip:%';--> statement-breakpoint
CREATE INDEX "operation_transitions_trips" ON "operation_transitions" USING btree ("tenant_id","created_at") WHERE "operation_transitions"."to_state" in ('UNKNOWN', 'FAILED_TERMINAL', 'BROADCAST');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "freeze_trips" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);