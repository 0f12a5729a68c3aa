CREATE TABLE "audit_log" (
	"tenant_id" uuid NOT NULL,
	"entry_id" uuid NOT NULL,
	"sequence" bigserial NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	"actor" text NOT NULL,
	"action" text NOT NULL,
	"outcome" text NOT NULL,
	"source_address" text,
	"request_id" text,
	"details" jsonb NOT NULL,
	CONSTRAINT "audit_log_tenant_id_entry_id_pk" PRIMARY KEY("tenant_id","entry_id")
);
--> statement-breakpoint
ALTER TABLE "audit_log" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "audit_log" ADD CONSTRAINT "audit_log_tenant_id_tenants_tenant_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("tenant_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "audit_log_page" ON "audit_log" USING btree ("tenant_id","sequence");--> statement-breakpoint
CREATE INDEX "audit_log_actor" ON "audit_log" USING btree ("tenant_id","actor","sequence");--> statement-breakpoint
CREATE INDEX "audit_log_action" ON "audit_log" USING btree ("tenant_id","action","sequence");--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "audit_log" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);