CREATE TABLE "staff_passkeys" (
	"tenant_id" uuid NOT NULL,
	"credential_id" text NOT NULL,
	"user_id" uuid NOT NULL,
	"label" text NOT NULL,
	"public_key" text NOT NULL,
	"counter" bigint DEFAULT 0 NOT NULL,
	"transports" text[] DEFAULT '{}'::text[] NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"activated_at" timestamp with time zone,
	"revoked_at" timestamp with time zone,
	CONSTRAINT "staff_passkeys_tenant_id_credential_id_pk" PRIMARY KEY("tenant_id","credential_id"),
	CONSTRAINT "staff_passkeys_counter_nonnegative" CHECK ("staff_passkeys"."counter" >= 0)
);
--> statement-breakpoint
ALTER TABLE "staff_passkeys" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "approvals" ADD COLUMN "passkey_assertion" jsonb;--> statement-breakpoint
ALTER TABLE "staff_passkeys" ADD CONSTRAINT "staff_passkeys_user_fk" FOREIGN KEY ("tenant_id","user_id") REFERENCES "public"."staff_users"("tenant_id","user_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "staff_passkeys_user" ON "staff_passkeys" USING btree ("tenant_id","user_id");--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "staff_passkeys" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);