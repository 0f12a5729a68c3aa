-- Network fees (issue 12): the gas a confirmed withdrawal paid is posted once per confirmation,
-- from '@custody' to the tenant's '@network_fees' expense, and reversed once if a reorganisation
-- undoes the confirmation. Checked at commit (the entry's postings exist by then): per operation,
-- fee entries minus reversals is 0 or 1, and a fee entry moves only between those two accounts.
-- Fee entries are written in the transaction that moves the operation to CONFIRMED (or back), a
-- conditional UPDATE of the operation's row, so two writers for one operation are serialised.
CREATE OR REPLACE FUNCTION public.idem_check_network_fee_entry() RETURNS trigger
  LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
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
END $$;
--> statement-breakpoint
DROP TRIGGER IF EXISTS journal_entries_network_fee_once ON journal_entries;
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER journal_entries_network_fee_once AFTER INSERT ON journal_entries
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (NEW.kind IN ('network_fee', 'network_fee_reversal'))
  EXECUTE FUNCTION public.idem_check_network_fee_entry();
