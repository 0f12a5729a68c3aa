-- Deferred trigger postings_balanced: every journal entry sums to zero per asset, checked at commit
-- so an entry's postings may be inserted one by one within its transaction (C11).
CREATE OR REPLACE FUNCTION public.idem_check_entry_balanced()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
  unbalanced text;
BEGIN
  SELECT asset_code INTO unbalanced FROM public.postings
   WHERE tenant_id = NEW.tenant_id AND entry_id = NEW.entry_id
   GROUP BY asset_code HAVING sum(amount) <> 0 LIMIT 1;
  IF unbalanced IS NOT NULL THEN
    RAISE EXCEPTION 'idem: journal entry % does not balance in %', NEW.entry_id, unbalanced
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END $function$

