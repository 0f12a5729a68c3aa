-- Reconciliation of an omnibus custodian account shared by several tenants must tell a transfer
-- that no tenant made from one another tenant made, without reading across tenants: this returns
-- only which of the given operation ids exist nowhere. Owned by the scheduler role.
GRANT SELECT (operation_id) ON operations TO idem_scheduler;
--> statement-breakpoint
CREATE FUNCTION idem_unknown_operation_ids(ids uuid[])
  RETURNS TABLE (operation_id uuid)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
  SELECT id FROM unnest(ids) AS id
   WHERE NOT EXISTS (SELECT 1 FROM operations o WHERE o.operation_id = id)
$$;
--> statement-breakpoint
ALTER FUNCTION idem_unknown_operation_ids(uuid[]) OWNER TO idem_scheduler;
--> statement-breakpoint
REVOKE ALL ON FUNCTION idem_unknown_operation_ids(uuid[]) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION idem_unknown_operation_ids(uuid[]) TO idem_app;
