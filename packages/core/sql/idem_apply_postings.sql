-- Trigger postings_apply_to_balances (per INSERT statement on postings): applies the new postings
-- to the balances projection by a conditional UPDATE that keeps available and held non-negative
-- (C08), so concurrent debits cannot overspend; IDM01 fails the statement when an account cannot
-- take its change. Owned by idem_journal, the only role that writes balances.
CREATE OR REPLACE FUNCTION public.idem_apply_postings()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
  d record;
BEGIN
  FOR d IN
    SELECT p.tenant_id, p.account, p.asset_code,
           coalesce(sum(p.amount) FILTER (WHERE p.bucket = 'available'), 0) AS available,
           coalesce(sum(p.amount) FILTER (WHERE p.bucket = 'held'), 0) AS held
      FROM inserted_postings p
     WHERE p.bucket <> 'control'
     GROUP BY p.tenant_id, p.account, p.asset_code
  LOOP
    CONTINUE WHEN d.available = 0 AND d.held = 0;
    UPDATE public.balances b
       SET available = b.available + d.available, held = b.held + d.held,
           version = b.version + 1, updated_at = now()
     WHERE b.tenant_id = d.tenant_id AND b.account_ref = d.account AND b.asset_code = d.asset_code
       AND b.available + d.available >= 0 AND b.held + d.held >= 0;
    CONTINUE WHEN FOUND;
    IF d.available < 0 OR d.held < 0 THEN
      RAISE EXCEPTION USING ERRCODE = 'IDM01', MESSAGE = 'insufficient available balance';
    END IF;
    -- A pure credit that updated nothing: the account has no row yet (or a concurrent first
    -- credit is creating it, hence ON CONFLICT).
    INSERT INTO public.balances AS b (tenant_id, account_ref, asset_code, available, held)
    VALUES (d.tenant_id, d.account, d.asset_code, d.available, d.held)
    ON CONFLICT (tenant_id, account_ref, asset_code) DO UPDATE
       SET available = b.available + excluded.available, held = b.held + excluded.held,
           version = b.version + 1, updated_at = now();
  END LOOP;
  RETURN NULL;
END $function$

