-- The per-asset sum of the ledgers of the tenants sharing an omnibus custodian account, for
-- balance reconciliation. SECURITY DEFINER as idem_reconciler; refuses to run inside a tenant's
-- scope and returns sums only, never a tenant's rows.
CREATE OR REPLACE FUNCTION public.idem_custodian_account_ledger(account_name text, custodian_networks text[])
 RETURNS TABLE(asset_code text, available numeric, held numeric, custody_control numeric, tenants integer)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF nullif(current_setting('app.tenant_id', true), '') IS NOT NULL THEN
    RAISE EXCEPTION 'idem: the custodian account sum is read outside any tenant''s scope'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN QUERY
  WITH members AS (
    SELECT t.tenant_id FROM public.tenants t WHERE t.custodian_account = account_name
  ), held_assets AS (
    SELECT a.tenant_id, a.code FROM public.assets a
     WHERE a.tenant_id IN (SELECT m.tenant_id FROM members m) AND a.network = ANY (custodian_networks)
  ), liabilities AS (
    SELECT b.asset_code AS code, sum(b.available) AS available, sum(b.held) AS held
      FROM public.balances b JOIN held_assets h ON h.tenant_id = b.tenant_id AND h.code = b.asset_code
     GROUP BY b.asset_code
  ), custody AS (
    SELECT p.asset_code AS code, -sum(p.amount) AS control
      FROM public.postings p JOIN held_assets h ON h.tenant_id = p.tenant_id AND h.code = p.asset_code
     WHERE p.account = '@custody'
     GROUP BY p.asset_code
  )
  SELECT c.code, coalesce(l.available, 0), coalesce(l.held, 0), coalesce(cu.control, 0),
         (SELECT count(*)::integer FROM members)
    FROM (SELECT DISTINCT h.code FROM held_assets h) c
    LEFT JOIN liabilities l ON l.code = c.code
    LEFT JOIN custody cu ON cu.code = c.code
   ORDER BY c.code;
END $function$

