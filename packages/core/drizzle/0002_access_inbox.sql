CREATE TABLE "api_keys" (
	"tenant_id" uuid NOT NULL,
	"key_id" uuid NOT NULL,
	"key_hash" text NOT NULL,
	"hint" text NOT NULL,
	"label" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"revoked_at" timestamp with time zone,
	CONSTRAINT "api_keys_tenant_id_key_id_pk" PRIMARY KEY("tenant_id","key_id"),
	CONSTRAINT "api_keys_tenant_hash" UNIQUE("tenant_id","key_hash")
);
--> statement-breakpoint
ALTER TABLE "api_keys" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "webhook_endpoints" (
	"tenant_id" uuid NOT NULL,
	"endpoint_id" text NOT NULL,
	"source" text NOT NULL,
	"secret" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"disabled_at" timestamp with time zone,
	CONSTRAINT "webhook_endpoints_tenant_id_endpoint_id_pk" PRIMARY KEY("tenant_id","endpoint_id")
);
--> statement-breakpoint
ALTER TABLE "webhook_endpoints" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "inbox_events" (
	"tenant_id" uuid NOT NULL,
	"source" text NOT NULL,
	"event_id" text NOT NULL,
	"endpoint_id" text NOT NULL,
	"event_type" text NOT NULL,
	"body_sha256" text NOT NULL,
	"body" jsonb NOT NULL,
	"status" text NOT NULL,
	"deliveries" integer DEFAULT 1 NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_delivery_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "inbox_events_tenant_id_source_event_id_pk" PRIMARY KEY("tenant_id","source","event_id"),
	CONSTRAINT "inbox_events_status_known" CHECK ("inbox_events"."status" in ('RECEIVED', 'UNHANDLED', 'PROCESSED', 'PARKED'))
);
--> statement-breakpoint
ALTER TABLE "inbox_events" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "inbox_quarantine" (
	"tenant_id" uuid NOT NULL,
	"quarantine_id" uuid NOT NULL,
	"source" text NOT NULL,
	"event_id" text NOT NULL,
	"endpoint_id" text NOT NULL,
	"reason" text NOT NULL,
	"body_sha256" text NOT NULL,
	"body" text NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	"resolved_at" timestamp with time zone,
	"resolved_by" text,
	CONSTRAINT "inbox_quarantine_tenant_id_quarantine_id_pk" PRIMARY KEY("tenant_id","quarantine_id"),
	CONSTRAINT "inbox_quarantine_tenant_event_body" UNIQUE("tenant_id","source","event_id","body_sha256"),
	CONSTRAINT "inbox_quarantine_reason_known" CHECK ("inbox_quarantine"."reason" in ('BODY_MISMATCH', 'MALFORMED'))
);
--> statement-breakpoint
ALTER TABLE "inbox_quarantine" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "inbox_rejections" (
	"tenant_id" uuid NOT NULL,
	"rejection_id" uuid NOT NULL,
	"endpoint_id" text NOT NULL,
	"reason" text NOT NULL,
	"body_length" integer NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "inbox_rejections_tenant_id_rejection_id_pk" PRIMARY KEY("tenant_id","rejection_id")
);
--> statement-breakpoint
ALTER TABLE "inbox_rejections" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE INDEX "webhook_endpoints_tenant_source" ON "webhook_endpoints" USING btree ("tenant_id","source");--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "api_keys" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "webhook_endpoints" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "inbox_events" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "inbox_quarantine" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "inbox_rejections" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);