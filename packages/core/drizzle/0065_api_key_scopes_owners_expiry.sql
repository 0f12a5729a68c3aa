-- Keys minted before scopes existed keep every scope, so no integrator's calls start failing; the
-- default is dropped at once, so every key minted from now on names its own scopes.
ALTER TABLE "api_keys" ADD COLUMN "scopes" text[] NOT NULL DEFAULT array['withdraw', 'customer-sessions', 'read', 'webhooks']::text[];--> statement-breakpoint
ALTER TABLE "api_keys" ALTER COLUMN "scopes" DROP DEFAULT;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "created_by" text;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "widened_by" text;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "widened_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "expires_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_scopes_known" CHECK (cardinality("api_keys"."scopes") between 1 and 4 and "api_keys"."scopes" <@ array['withdraw', 'customer-sessions', 'read', 'webhooks']::text[]);--> statement-breakpoint
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_widened_together" CHECK (("api_keys"."widened_by" is null) = ("api_keys"."widened_at" is null));--> statement-breakpoint
-- The application role changes a key's scopes and records who widened them; who minted a key and
-- when it expires are written once, at minting, and never change (idem_guard_api_key_update).
GRANT UPDATE (scopes, widened_by, widened_at) ON api_keys TO idem_app;
