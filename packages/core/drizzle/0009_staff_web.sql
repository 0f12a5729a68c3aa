CREATE TABLE "customer_session_links" (
	"tenant_id" uuid NOT NULL,
	"link_hash" text NOT NULL,
	"account_ref" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"used_at" timestamp with time zone,
	CONSTRAINT "customer_session_links_tenant_id_link_hash_pk" PRIMARY KEY("tenant_id","link_hash")
);
--> statement-breakpoint
ALTER TABLE "customer_session_links" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "staff_users" (
	"tenant_id" uuid NOT NULL,
	"user_id" uuid NOT NULL,
	"email" text NOT NULL,
	"password_hash" text NOT NULL,
	"role" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"disabled_at" timestamp with time zone,
	CONSTRAINT "staff_users_tenant_id_user_id_pk" PRIMARY KEY("tenant_id","user_id"),
	CONSTRAINT "staff_users_tenant_email" UNIQUE("tenant_id","email"),
	CONSTRAINT "staff_users_role_known" CHECK ("staff_users"."role" in ('support', 'approver', 'operator', 'admin'))
);
--> statement-breakpoint
ALTER TABLE "staff_users" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "tenant_branding" (
	"tenant_id" uuid NOT NULL,
	"display_name" text NOT NULL,
	"logo_url" text,
	"primary_color" text NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_by" text NOT NULL,
	CONSTRAINT "tenant_branding_tenant_id_pk" PRIMARY KEY("tenant_id"),
	CONSTRAINT "tenant_branding_color_hex" CHECK ("tenant_branding"."primary_color" ~ '^#[0-9a-fA-F]{6}$'),
	CONSTRAINT "tenant_branding_logo_https" CHECK ("tenant_branding"."logo_url" is null or "tenant_branding"."logo_url" ~ '^https://')
);
--> statement-breakpoint
ALTER TABLE "tenant_branding" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "web_sessions" (
	"tenant_id" uuid NOT NULL,
	"session_hash" text NOT NULL,
	"kind" text NOT NULL,
	"user_id" uuid,
	"account_ref" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"revoked_at" timestamp with time zone,
	CONSTRAINT "web_sessions_tenant_id_session_hash_pk" PRIMARY KEY("tenant_id","session_hash"),
	CONSTRAINT "web_sessions_kind_subject" CHECK (("web_sessions"."kind" = 'staff' and "web_sessions"."user_id" is not null and "web_sessions"."account_ref" is null)
        or ("web_sessions"."kind" = 'customer' and "web_sessions"."account_ref" is not null and "web_sessions"."user_id" is null))
);
--> statement-breakpoint
ALTER TABLE "web_sessions" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "customer_session_links" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "staff_users" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "tenant_branding" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "web_sessions" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);