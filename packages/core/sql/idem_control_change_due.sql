-- Whether the tenant holds a control change (docs/GOVERNANCE.md) of kind p_control that names the
-- row (its payload's change.<p_field> is p_id), is APPROVED and past its effective time, and whose
-- change contains p_also (jsonb containment: '{}' asks nothing more; {"scopes": [...]} asks that it
-- grants at least those scopes). The one check behind the triggers that let the application role
-- make a key or an endpoint live, or widen a key, only as the apply step of such a change
-- (idem_guard_api_key_update, idem_guard_outbound_endpoint_update). Runs as the caller, so
-- row-level security shows it the caller's tenant's proposals only.
CREATE OR REPLACE FUNCTION public.idem_control_change_due(p_tenant uuid, p_control text, p_field text, p_id text, p_also jsonb DEFAULT '{}'::jsonb)
 RETURNS boolean
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
  SELECT EXISTS (
    SELECT 1 FROM public.proposals p
     WHERE p.tenant_id = p_tenant
       AND p.kind = 'control_change'
       AND p.state = 'APPROVED'
       AND p.effective_at <= now()
       AND p.payload -> 'change' ->> 'control' = p_control
       AND p.payload -> 'change' ->> p_field = p_id
       AND p.payload -> 'change' @> p_also)
$function$
