CREATE TABLE "sign_in_address_failures" (
	"address_hash" text PRIMARY KEY NOT NULL,
	"failures" integer NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	CONSTRAINT "sign_in_address_failures_hash" CHECK ("sign_in_address_failures"."address_hash" ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "sign_in_address_failures_count" CHECK ("sign_in_address_failures"."failures" >= 0)
);
--> statement-breakpoint
ALTER TABLE "sign_in_address_failures" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "sign_in_failures" (
	"tenant_id" uuid NOT NULL,
	"account_hash" text NOT NULL,
	"failures" integer NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	CONSTRAINT "sign_in_failures_tenant_id_account_hash_pk" PRIMARY KEY("tenant_id","account_hash"),
	CONSTRAINT "sign_in_failures_hash" CHECK ("sign_in_failures"."account_hash" ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "sign_in_failures_count" CHECK ("sign_in_failures"."failures" >= 0)
);
--> statement-breakpoint
ALTER TABLE "sign_in_failures" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE INDEX "sign_in_address_failures_expires" ON "sign_in_address_failures" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "sign_in_failures_expires" ON "sign_in_failures" USING btree ("expires_at");--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "sign_in_failures" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);