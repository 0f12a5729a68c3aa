ALTER TABLE "api_keys" ADD COLUMN "activated_at" timestamp with time zone DEFAULT now();--> statement-breakpoint
ALTER TABLE "outbound_endpoints" ADD COLUMN "activated_at" timestamp with time zone DEFAULT now();--> statement-breakpoint
GRANT UPDATE (activated_at) ON api_keys TO idem_app;--> statement-breakpoint
GRANT UPDATE (activated_at) ON outbound_endpoints TO idem_app;
