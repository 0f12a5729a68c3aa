ALTER TABLE "web_sessions" ADD COLUMN "mfa_failures" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "web_sessions" ADD COLUMN "mfa_failures_reset_at" timestamp with time zone;--> statement-breakpoint
-- The session's own budget of TOTP codes: the application role takes and resets its slots.
GRANT UPDATE (mfa_failures, mfa_failures_reset_at) ON web_sessions TO idem_app;
