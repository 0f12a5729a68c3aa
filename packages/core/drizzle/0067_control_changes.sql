CREATE TABLE "staff_notifications" (
	"tenant_id" uuid NOT NULL,
	"notification_id" uuid NOT NULL,
	"recipient" text NOT NULL,
	"topic" text NOT NULL,
	"proposal_id" uuid,
	"message" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "staff_notifications_tenant_id_notification_id_pk" PRIMARY KEY("tenant_id","notification_id")
);
--> statement-breakpoint
ALTER TABLE "staff_notifications" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "proposals" DROP CONSTRAINT "proposals_kind_known";--> statement-breakpoint
ALTER TABLE "proposals" DROP CONSTRAINT "proposals_state_known";--> statement-breakpoint
ALTER TABLE "tenant_governance" ADD COLUMN "admin_quorum" integer DEFAULT 2 NOT NULL;--> statement-breakpoint
ALTER TABLE "tenant_governance" ADD COLUMN "loosening_delay_seconds" integer DEFAULT 86400 NOT NULL;--> statement-breakpoint
ALTER TABLE "tenant_governance" ADD COLUMN "single_admin" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "proposals" ADD COLUMN "effective_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "staff_notifications_recipient" ON "staff_notifications" USING btree ("tenant_id","recipient","created_at");--> statement-breakpoint
CREATE INDEX "proposals_due" ON "proposals" USING btree ("tenant_id","effective_at") WHERE "proposals"."state" = 'APPROVED';--> statement-breakpoint
ALTER TABLE "tenant_governance" ADD CONSTRAINT "tenant_governance_quorum_range" CHECK ("tenant_governance"."admin_quorum" between 2 and 20);--> statement-breakpoint
ALTER TABLE "tenant_governance" ADD CONSTRAINT "tenant_governance_delay_range" CHECK ("tenant_governance"."loosening_delay_seconds" between 0 and 2592000);--> statement-breakpoint
ALTER TABLE "proposals" ADD CONSTRAINT "proposals_kind_known" CHECK ("proposals"."kind" in ('resolve_withdrawal', 'adjustment', 'manual_credit', 'cancel_withdrawal', 'raise_fee_cap', 'control_change'));--> statement-breakpoint
ALTER TABLE "proposals" ADD CONSTRAINT "proposals_state_known" CHECK ("proposals"."state" in ('PENDING', 'APPROVED', 'EXECUTED', 'REJECTED', 'CANCELLED', 'EXPIRED'));--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "staff_notifications" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);