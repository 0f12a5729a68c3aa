-- Writes one journal entry and its postings in one round trip (postEntry), all or nothing: returns
-- false, having written nothing, when an account cannot take its change, and the caller's
-- transaction stays usable. Runs as the caller; the deferred trigger checks the entry balances at commit (C11).
CREATE OR REPLACE FUNCTION public.idem_post_entry(p_tenant_id uuid, p_entry_id uuid, p_operation_id uuid, p_kind text, p_postings jsonb)
 RETURNS boolean
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  INSERT INTO public.journal_entries (tenant_id, entry_id, operation_id, kind)
  VALUES (p_tenant_id, p_entry_id, p_operation_id, p_kind);
  INSERT INTO public.postings (tenant_id, entry_id, posting_no, account, bucket, asset_code, amount)
  SELECT p_tenant_id, p_entry_id, x.posting_no, x.account, x.bucket, x.asset_code, x.amount
    FROM jsonb_to_recordset(p_postings) AS x(posting_no integer, account text, bucket text, asset_code text, amount numeric);
  RETURN true;
EXCEPTION WHEN SQLSTATE 'IDM01' THEN
  RETURN false;
END $function$

