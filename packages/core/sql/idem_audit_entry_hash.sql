-- The hash of one audit row: sha256 (hex) of the canonical JSON of its fields and the previous
-- row's hash. Canonical: keys in code-point order, no spaces, every value a JSON string (or null),
-- strings escaped as JSON.stringify does; `at` as UTC with microseconds, `details` as PostgreSQL's
-- own jsonb text (one text per jsonb value, whatever order its keys were sent in). The verifier
-- (src/audit/audit-chain.ts) builds the same text on its own, so this function is checked, not trusted.
CREATE OR REPLACE FUNCTION public.idem_audit_entry_hash(p_prev_hash text, p_tenant_id uuid, p_entry_id uuid, p_position bigint, p_at timestamp with time zone, p_actor text, p_action text, p_outcome text, p_source_address text, p_request_id text, p_details jsonb)
 RETURNS text
 LANGUAGE sql
 STABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
  SELECT encode(sha256(convert_to(
    '{"action":' || coalesce(to_json(p_action)::text, 'null') ||
    ',"actor":' || coalesce(to_json(p_actor)::text, 'null') ||
    ',"at":' || coalesce(to_json(to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::text, 'null') ||
    ',"details":' || coalesce(to_json(p_details::text)::text, 'null') ||
    ',"entryId":' || coalesce(to_json(p_entry_id::text)::text, 'null') ||
    ',"outcome":' || coalesce(to_json(p_outcome)::text, 'null') ||
    ',"position":' || coalesce(to_json(p_position::text)::text, 'null') ||
    ',"prevHash":' || coalesce(to_json(p_prev_hash)::text, 'null') ||
    ',"requestId":' || coalesce(to_json(p_request_id)::text, 'null') ||
    ',"sourceAddress":' || coalesce(to_json(p_source_address)::text, 'null') ||
    ',"tenantId":' || coalesce(to_json(p_tenant_id::text)::text, 'null') ||
    '}', 'UTF8')), 'hex')
$function$
