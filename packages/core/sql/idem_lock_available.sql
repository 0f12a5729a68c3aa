-- Locks the balance rows a withdrawal batch holds from, until commit, in one global order (account,
-- then asset), and answers what each has available. SECURITY DEFINER as idem_journal (the
-- application role may not lock balances), for the tenant the transaction is bound to only.
CREATE OR REPLACE FUNCTION public.idem_lock_available(p_tenant_id uuid, p_account_refs text[], p_asset_codes text[])
 RETURNS TABLE(account_ref text, asset_code text, available numeric)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
BEGIN
  IF p_tenant_id IS DISTINCT FROM nullif(current_setting('app.tenant_id', true), '')::uuid THEN
    RAISE EXCEPTION 'idem: this transaction is not bound to that tenant' USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN QUERY
  SELECT b.account_ref, b.asset_code, b.available
    FROM public.balances b
   WHERE b.tenant_id = p_tenant_id
     AND (b.account_ref, b.asset_code) IN (SELECT * FROM unnest(p_account_refs, p_asset_codes))
   ORDER BY b.account_ref COLLATE "C", b.asset_code COLLATE "C"
     FOR UPDATE OF b;
END $function$

