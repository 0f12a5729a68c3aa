CREATE TABLE "freezes" (
	"tenant_id" uuid NOT NULL,
	"freeze_id" uuid NOT NULL,
	"scope" text NOT NULL,
	"asset_code" text,
	"account_ref" text,
	"reason" text NOT NULL,
	"frozen_by" text NOT NULL,
	"frozen_at" timestamp with time zone DEFAULT now() NOT NULL,
	"lifted_at" timestamp with time zone,
	"lifted_by" text,
	"lift_proposal_id" uuid,
	CONSTRAINT "freezes_tenant_id_freeze_id_pk" PRIMARY KEY("tenant_id","freeze_id"),
	CONSTRAINT "freezes_scope_target" CHECK (("freezes"."scope" = 'tenant' and "freezes"."asset_code" is null and "freezes"."account_ref" is null)
       or ("freezes"."scope" = 'asset' and "freezes"."asset_code" is not null and "freezes"."account_ref" is null)
       or ("freezes"."scope" = 'account' and "freezes"."account_ref" is not null and "freezes"."asset_code" is null)),
	CONSTRAINT "freezes_reason_given" CHECK (length("freezes"."reason") > 0),
	CONSTRAINT "freezes_actor_named" CHECK (length("freezes"."frozen_by") > 0),
	CONSTRAINT "freezes_lift_whole" CHECK (("freezes"."lifted_at" is null and "freezes"."lifted_by" is null and "freezes"."lift_proposal_id" is null)
       or ("freezes"."lifted_at" is not null and "freezes"."lifted_by" is not null and "freezes"."lift_proposal_id" is not null))
);
--> statement-breakpoint
ALTER TABLE "freezes" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE INDEX "freezes_in_force" ON "freezes" USING btree ("tenant_id","scope") WHERE "freezes"."lifted_at" is null;--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "freezes" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid) WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);