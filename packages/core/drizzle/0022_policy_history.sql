CREATE TABLE "policy_history" (
	"tenant_id" uuid NOT NULL,
	"to_version" integer NOT NULL,
	"from_version" integer NOT NULL,
	"policy" text NOT NULL,
	"asset_code" text,
	"before" jsonb,
	"after" jsonb,
	"actor" text NOT NULL,
	"changed_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "policy_history_tenant_id_to_version_pk" PRIMARY KEY("tenant_id","to_version"),
	CONSTRAINT "policy_history_one_step" CHECK ("policy_history"."to_version" = "policy_history"."from_version" + 1),
	CONSTRAINT "policy_history_policy_known" CHECK ("policy_history"."policy" in ('risk')),
	CONSTRAINT "policy_history_actor_named" CHECK (length("policy_history"."actor") > 0),
	CONSTRAINT "policy_history_changed" CHECK ("policy_history"."before" is not null or "policy_history"."after" is not null)
);
--> statement-breakpoint
ALTER TABLE "policy_history" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "policy_history" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);