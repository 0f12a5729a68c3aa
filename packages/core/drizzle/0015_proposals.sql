CREATE TABLE "proposal_decisions" (
	"tenant_id" uuid NOT NULL,
	"proposal_id" uuid NOT NULL,
	"approver" text NOT NULL,
	"payload_hash" text NOT NULL,
	"decision" text NOT NULL,
	"reason" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "proposal_decisions_tenant_id_proposal_id_approver_pk" PRIMARY KEY("tenant_id","proposal_id","approver"),
	CONSTRAINT "proposal_decisions_decision_known" CHECK ("proposal_decisions"."decision" in ('approve', 'reject'))
);
--> statement-breakpoint
ALTER TABLE "proposal_decisions" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "proposals" (
	"tenant_id" uuid NOT NULL,
	"proposal_id" uuid NOT NULL,
	"kind" text NOT NULL,
	"idempotency_key" text NOT NULL,
	"target_operation_id" uuid,
	"payload" jsonb NOT NULL,
	"evidence" jsonb,
	"payload_hash" text NOT NULL,
	"proposed_by" text NOT NULL,
	"approvals_required" integer NOT NULL,
	"state" text DEFAULT 'PENDING' NOT NULL,
	"result" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"decided_at" timestamp with time zone,
	CONSTRAINT "proposals_tenant_id_proposal_id_pk" PRIMARY KEY("tenant_id","proposal_id"),
	CONSTRAINT "proposals_tenant_key" UNIQUE("tenant_id","idempotency_key"),
	CONSTRAINT "proposals_kind_known" CHECK ("proposals"."kind" in ('resolve_withdrawal', 'adjustment', 'manual_credit')),
	CONSTRAINT "proposals_state_known" CHECK ("proposals"."state" in ('PENDING', 'EXECUTED', 'REJECTED', 'CANCELLED')),
	CONSTRAINT "proposals_approvals_positive" CHECK ("proposals"."approvals_required" >= 1),
	CONSTRAINT "proposals_hash_hex" CHECK ("proposals"."payload_hash" ~ '^[0-9a-f]{64}$')
);
--> statement-breakpoint
ALTER TABLE "proposals" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE INDEX "proposals_tenant_state" ON "proposals" USING btree ("tenant_id","state","created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "proposals_one_pending_per_target" ON "proposals" USING btree ("tenant_id","target_operation_id") WHERE "proposals"."state" = 'PENDING' and "proposals"."target_operation_id" is not null;--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "proposal_decisions" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "proposals" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);