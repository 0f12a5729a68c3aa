CREATE TABLE "staff_invitations" (
	"tenant_id" uuid NOT NULL,
	"invitation_hash" text NOT NULL,
	"user_id" uuid NOT NULL,
	"created_by" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"used_at" timestamp with time zone,
	CONSTRAINT "staff_invitations_tenant_id_invitation_hash_pk" PRIMARY KEY("tenant_id","invitation_hash")
);
--> statement-breakpoint
ALTER TABLE "staff_invitations" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "tenant_slugs" (
	"slug" text PRIMARY KEY NOT NULL,
	"tenant_id" uuid NOT NULL,
	CONSTRAINT "tenant_slugs_tenant" UNIQUE("tenant_id"),
	CONSTRAINT "tenant_slugs_shape" CHECK ("tenant_slugs"."slug" ~ '^[a-z0-9](?:[a-z0-9-]{0,46}[a-z0-9])?$')
);
--> statement-breakpoint
ALTER TABLE "tenant_slugs" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "staff_users" ADD COLUMN "mfa_secret" text;--> statement-breakpoint
ALTER TABLE "staff_users" ADD COLUMN "mfa_pending_secret" text;--> statement-breakpoint
ALTER TABLE "staff_users" ADD COLUMN "mfa_enrolled_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "staff_users" ADD COLUMN "mfa_last_step" bigint;--> statement-breakpoint
ALTER TABLE "staff_users" ADD COLUMN "mfa_recovery_hashes" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "staff_users" ADD COLUMN "mfa_failures" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "staff_users" ADD COLUMN "mfa_failures_reset_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "web_sessions" ADD COLUMN "mfa_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "tenants" ADD COLUMN "mfa_required" boolean DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE "tenants" ADD COLUMN "mfa_fresh_seconds" integer DEFAULT 300 NOT NULL;--> statement-breakpoint
ALTER TABLE "staff_invitations" ADD CONSTRAINT "staff_invitations_user" FOREIGN KEY ("tenant_id","user_id") REFERENCES "public"."staff_users"("tenant_id","user_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tenants" ADD CONSTRAINT "tenants_mfa_fresh_range" CHECK ("tenants"."mfa_fresh_seconds" between 30 and 3600);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "staff_invitations" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "tenant_slugs" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);