-- Break lifecycle (issue 13, C21). A timing break ends one of two ways without a person: it
-- closes as 'arrived' when the item it waited for arrives, or as 'escalated' when the asset's
-- window passes, and then a NEW genuine_variance break of the same subject names it in
-- escalated_from. A person closes as 'resolved'. The class of a break never changes (the
-- existing guard); these rules keep the link consistent whatever the application writes.

-- Breaks closed before this migration were closed by a person.
ALTER TABLE reconciliation_breaks DISABLE TRIGGER reconciliation_breaks_guard;
--> statement-breakpoint
UPDATE reconciliation_breaks SET closed_as = 'resolved' WHERE status = 'closed';
--> statement-breakpoint
ALTER TABLE reconciliation_breaks ENABLE TRIGGER reconciliation_breaks_guard;
--> statement-breakpoint
ALTER TABLE reconciliation_breaks ADD CONSTRAINT reconciliation_breaks_closed_as_known
  CHECK (closed_as IN ('resolved', 'arrived', 'escalated') AND status = 'closed' OR closed_as IS NULL AND status = 'open');
--> statement-breakpoint
ALTER TABLE reconciliation_breaks ADD CONSTRAINT reconciliation_breaks_escalation_is_variance
  CHECK (escalated_from IS NULL OR break_class = 'genuine_variance');
--> statement-breakpoint
-- Only a timing break of the same subject, closed as escalated, may be named as escalated_from.
CREATE FUNCTION public.idem_check_break_escalation() RETURNS trigger
  LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
  origin public.reconciliation_breaks%ROWTYPE;
BEGIN
  SELECT * INTO origin FROM public.reconciliation_breaks
   WHERE tenant_id = NEW.tenant_id AND break_id = NEW.escalated_from;
  IF NOT FOUND OR origin.break_class <> 'timing' OR origin.subject <> NEW.subject
     OR origin.status <> 'closed' OR origin.closed_as IS DISTINCT FROM 'escalated' THEN
    RAISE EXCEPTION 'idem: break % may escalate only a timing break of subject % closed as escalated', NEW.break_id, NEW.subject
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $$;
--> statement-breakpoint
CREATE TRIGGER reconciliation_breaks_escalation_link BEFORE INSERT ON reconciliation_breaks
  FOR EACH ROW WHEN (NEW.escalated_from IS NOT NULL)
  EXECUTE FUNCTION public.idem_check_break_escalation();
--> statement-breakpoint
-- A break closed as escalated has its escalation by the end of the transaction.
CREATE FUNCTION public.idem_check_break_escalated() RETURNS trigger
  LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM public.reconciliation_breaks
                  WHERE tenant_id = NEW.tenant_id AND escalated_from = NEW.break_id) THEN
    RAISE EXCEPTION 'idem: break % closed as escalated without the genuine_variance break that escalates it', NEW.break_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER reconciliation_breaks_escalated_has_successor AFTER INSERT OR UPDATE ON reconciliation_breaks
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (NEW.closed_as = 'escalated')
  EXECUTE FUNCTION public.idem_check_break_escalated();
--> statement-breakpoint
GRANT UPDATE (closed_as) ON reconciliation_breaks TO idem_app;
