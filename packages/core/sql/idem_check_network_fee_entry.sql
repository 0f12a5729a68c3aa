-- Deferred trigger journal_entries_network_fee_once: a confirmed withdrawal's network fee is posted
-- at most once (fee entries minus reversals is 0 or 1 per operation) and moves only between
-- @custody and @network_fees.
CREATE OR REPLACE FUNCTION public.idem_check_network_fee_entry()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
  outstanding bigint;
  stray integer;
BEGIN
  SELECT count(*) FILTER (WHERE kind = 'network_fee') - count(*) FILTER (WHERE kind = 'network_fee_reversal')
    INTO outstanding
    FROM public.journal_entries
   WHERE tenant_id = NEW.tenant_id AND operation_id = NEW.operation_id;
  IF outstanding NOT IN (0, 1) THEN
    RAISE EXCEPTION 'idem: operation % would have % network fees posted; the fee is posted once per confirmation', NEW.operation_id, outstanding
      USING ERRCODE = 'check_violation';
  END IF;
  SELECT count(*) INTO stray FROM public.postings
   WHERE tenant_id = NEW.tenant_id AND entry_id = NEW.entry_id
     AND account NOT IN ('@custody', '@network_fees');
  IF stray > 0 THEN
    RAISE EXCEPTION 'idem: network fee entry % moves money outside @custody and @network_fees', NEW.entry_id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END $function$

