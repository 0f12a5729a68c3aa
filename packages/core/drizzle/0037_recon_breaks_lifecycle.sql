ALTER TABLE "reconciliation_breaks" ADD COLUMN "closed_as" text;--> statement-breakpoint
ALTER TABLE "reconciliation_breaks" ADD COLUMN "escalated_from" uuid;--> statement-breakpoint
ALTER TABLE "assets" ADD COLUMN "reconciliation_window_seconds" integer DEFAULT 3600 NOT NULL;--> statement-breakpoint
ALTER TABLE "reconciliation_breaks" ADD CONSTRAINT "reconciliation_breaks_escalated_from_fk" FOREIGN KEY ("tenant_id","escalated_from") REFERENCES "public"."reconciliation_breaks"("tenant_id","break_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "reconciliation_breaks_one_escalation" ON "reconciliation_breaks" USING btree ("tenant_id","escalated_from") WHERE "reconciliation_breaks"."escalated_from" is not null;--> statement-breakpoint
ALTER TABLE "assets" ADD CONSTRAINT "assets_reconciliation_window_range" CHECK ("assets"."reconciliation_window_seconds" between 1 and 604800);