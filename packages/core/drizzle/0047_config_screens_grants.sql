-- Issue 14 (configuration screens): the application role records an API key's last use, and
-- rotates a webhook endpoint's secret (the new secret, the previous one with the end of its overlap,
-- and when the rotation happened). Nothing else of these rows becomes writable.
GRANT UPDATE (last_used_at) ON api_keys TO idem_app;
--> statement-breakpoint
GRANT UPDATE (secret, previous_secret, previous_secret_until, rotated_at) ON webhook_endpoints TO idem_app;
--> statement-breakpoint
GRANT UPDATE (secret, previous_secret, previous_secret_until, rotated_at) ON outbound_endpoints TO idem_app;
