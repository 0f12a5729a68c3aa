CREATE TABLE "fee_bump_requests" (
	"tenant_id" uuid NOT NULL,
	"request_id" uuid NOT NULL,
	"operation_id" uuid NOT NULL,
	"requested_by" text NOT NULL,
	"reason" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "fee_bump_requests_tenant_id_request_id_pk" PRIMARY KEY("tenant_id","request_id")
);
--> statement-breakpoint
ALTER TABLE "fee_bump_requests" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "signed_attempts" (
	"tenant_id" uuid NOT NULL,
	"operation_id" uuid NOT NULL,
	"attempt_no" integer NOT NULL,
	"nonce" bigint NOT NULL,
	"kind" text NOT NULL,
	"signed_artifact" text NOT NULL,
	"tx_hash" text NOT NULL,
	"gas_limit" numeric(78, 0) NOT NULL,
	"max_fee_per_gas" numeric(78, 0) NOT NULL,
	"max_priority_fee_per_gas" numeric(78, 0) NOT NULL,
	"lease_generation" bigint NOT NULL,
	"created_by" text NOT NULL,
	"requested_by" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "signed_attempts_tenant_id_operation_id_attempt_no_pk" PRIMARY KEY("tenant_id","operation_id","attempt_no"),
	CONSTRAINT "signed_attempts_tx_hash" UNIQUE("tenant_id","tx_hash"),
	CONSTRAINT "signed_attempts_kind_known" CHECK ("signed_attempts"."kind" in ('original', 'replacement', 'cancel')),
	CONSTRAINT "signed_attempts_original_first" CHECK (("signed_attempts"."attempt_no" = 1) = ("signed_attempts"."kind" = 'original') and "signed_attempts"."attempt_no" >= 1),
	CONSTRAINT "signed_attempts_fees" CHECK ("signed_attempts"."max_priority_fee_per_gas" <= "signed_attempts"."max_fee_per_gas" and "signed_attempts"."gas_limit" > 0)
);
--> statement-breakpoint
ALTER TABLE "signed_attempts" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "proposals" DROP CONSTRAINT "proposals_kind_known";--> statement-breakpoint
CREATE INDEX "fee_bump_requests_operation" ON "fee_bump_requests" USING btree ("tenant_id","operation_id","created_at");--> statement-breakpoint
CREATE INDEX "signed_attempts_tenant_created" ON "signed_attempts" USING btree ("tenant_id","created_at");--> statement-breakpoint
ALTER TABLE "proposals" ADD CONSTRAINT "proposals_kind_known" CHECK ("proposals"."kind" in ('resolve_withdrawal', 'adjustment', 'manual_credit', 'cancel_withdrawal', 'raise_fee_cap'));--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "fee_bump_requests" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "signed_attempts" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);