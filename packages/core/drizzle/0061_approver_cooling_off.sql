ALTER TABLE "staff_users" ADD COLUMN "approvals_from" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "tenants" ADD COLUMN "approver_cooling_off_seconds" integer DEFAULT 86400 NOT NULL;--> statement-breakpoint
ALTER TABLE "tenants" ADD CONSTRAINT "tenants_cooling_off_range" CHECK ("tenants"."approver_cooling_off_seconds" between 0 and 2592000);