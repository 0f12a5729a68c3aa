-- Issue 12: a flaky node is no evidence. The deposit watcher may now move an orphaned observation
-- back to seen (its transaction reappeared, possibly in another block) and keeps the first sighting
-- of a reorganisation (mismatch_head, mismatch_hash) until a later pass confirms or clears it.
-- The reconciler keeps the first pass of a not-sent verdict in not_sent_observations.
ALTER TABLE not_sent_observations FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
GRANT SELECT, INSERT, DELETE ON not_sent_observations TO idem_app;
--> statement-breakpoint
GRANT UPDATE (nonce, consumer_tx_hash, consumer_block, pinned_block, observed_at) ON not_sent_observations TO idem_app;
--> statement-breakpoint
GRANT UPDATE (block_number, block_hash, mismatch_head, mismatch_hash) ON deposit_observations TO idem_app;
--> statement-breakpoint
-- Which way an observation may move: a credited deposit is only ever reversed, a reversed one is
-- final (crediting again would need a new operation), an orphaned one may be seen again. Its
-- identity and amount never change; its block only while it is not yet reversed.
CREATE OR REPLACE FUNCTION idem_deposit_observation_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
  IF NEW.tenant_id <> OLD.tenant_id OR NEW.deposit_id <> OLD.deposit_id OR NEW.network <> OLD.network
     OR NEW.account_ref <> OLD.account_ref OR NEW.asset_code <> OLD.asset_code
     OR NEW.amount_minor <> OLD.amount_minor THEN
    RAISE EXCEPTION 'idem: a deposit observation''s identity and amount never change'
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.status <> OLD.status AND NOT (
       (OLD.status = 'seen' AND NEW.status IN ('credited', 'orphaned'))
    OR (OLD.status = 'orphaned' AND NEW.status = 'seen')
    OR (OLD.status = 'credited' AND NEW.status = 'reversed')) THEN
    RAISE EXCEPTION 'idem: a deposit observation cannot move from % to %', OLD.status, NEW.status
      USING ERRCODE = 'check_violation';
  END IF;
  IF OLD.status = 'reversed' AND (NEW.block_number <> OLD.block_number OR NEW.block_hash <> OLD.block_hash) THEN
    RAISE EXCEPTION 'idem: a reversed deposit observation is final'
      USING ERRCODE = 'check_violation';
  END IF;
  IF OLD.operation_id IS NOT NULL AND NEW.operation_id IS DISTINCT FROM OLD.operation_id THEN
    RAISE EXCEPTION 'idem: a deposit observation''s operation never changes'
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$$;
--> statement-breakpoint
DROP TRIGGER IF EXISTS deposit_observations_guard ON deposit_observations;
--> statement-breakpoint
CREATE TRIGGER deposit_observations_guard BEFORE UPDATE ON deposit_observations
  FOR EACH ROW EXECUTE FUNCTION idem_deposit_observation_guard();
