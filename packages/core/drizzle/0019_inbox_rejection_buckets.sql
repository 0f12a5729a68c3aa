CREATE TABLE "inbox_rejection_buckets" (
	"tenant_id" uuid NOT NULL,
	"endpoint_id" text NOT NULL,
	"reason" text NOT NULL,
	"bucket_start" timestamp with time zone NOT NULL,
	"rejections" integer NOT NULL,
	"body_length_max" integer NOT NULL,
	"first_seen_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_seen_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "inbox_rejection_buckets_tenant_id_endpoint_id_reason_bucket_start_pk" PRIMARY KEY("tenant_id","endpoint_id","reason","bucket_start"),
	CONSTRAINT "inbox_rejection_buckets_reason_known" CHECK (reason in ('MISSING_HEADERS', 'BAD_SIGNATURE', 'BAD_TIMESTAMP', 'STALE_TIMESTAMP', 'FUTURE_TIMESTAMP', 'OTHER')),
	CONSTRAINT "inbox_rejection_buckets_counted" CHECK ("inbox_rejection_buckets"."rejections" >= 1 and "inbox_rejection_buckets"."body_length_max" >= 0)
);
--> statement-breakpoint
ALTER TABLE "inbox_rejection_buckets" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "inbox_rejection_buckets" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);