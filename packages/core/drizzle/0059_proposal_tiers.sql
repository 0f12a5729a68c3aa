CREATE TABLE "tenant_governance" (
	"tenant_id" uuid NOT NULL,
	"proposal_ttl_seconds" integer DEFAULT 259200 NOT NULL,
	CONSTRAINT "tenant_governance_tenant_id_pk" PRIMARY KEY("tenant_id"),
	CONSTRAINT "tenant_governance_ttl_range" CHECK ("tenant_governance"."proposal_ttl_seconds" between 1 and 2592000)
);
--> statement-breakpoint
ALTER TABLE "tenant_governance" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "proposals" DROP CONSTRAINT "proposals_state_known";--> statement-breakpoint
ALTER TABLE "proposals" ADD COLUMN "expires_at" timestamp with time zone DEFAULT now() + interval '72 hours' NOT NULL;--> statement-breakpoint
ALTER TABLE "proposals" ADD CONSTRAINT "proposals_state_known" CHECK ("proposals"."state" in ('PENDING', 'EXECUTED', 'REJECTED', 'CANCELLED', 'EXPIRED'));--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "tenant_governance" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);