-- Invariants the database enforces itself, whatever the application does.
-- drizzle-kit emits tables, policies and ENABLE ROW LEVEL SECURITY; this migration adds what it
-- cannot: the restricted application role, FORCE ROW LEVEL SECURITY, grants and triggers.

-- The role every tenant-scoped transaction runs under (SET LOCAL ROLE). Roles are cluster-wide,
-- so creation tolerates a concurrent or earlier creator.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'idem_app') THEN
    CREATE ROLE idem_app NOLOGIN NOSUPERUSER NOBYPASSRLS;
  END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;
--> statement-breakpoint
GRANT USAGE ON SCHEMA public TO idem_app;
--> statement-breakpoint
GRANT SELECT ON tenants, assets TO idem_app;
--> statement-breakpoint
GRANT SELECT, INSERT, UPDATE ON balances, operations, work_items TO idem_app;
--> statement-breakpoint
GRANT SELECT, INSERT ON operation_transitions, journal_entries, postings TO idem_app;
--> statement-breakpoint
ALTER TABLE tenants FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE assets FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE balances FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE operations FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE operation_transitions FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE journal_entries FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE postings FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE work_items FORCE ROW LEVEL SECURITY;
--> statement-breakpoint

-- Append-only tables (C11, and the operation history): UPDATE and DELETE are refused for every
-- role, owners and superusers included.
CREATE FUNCTION idem_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'idem: % is append-only; % refused', TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'integrity_constraint_violation';
END $$;
--> statement-breakpoint
CREATE TRIGGER journal_entries_append_only BEFORE UPDATE OR DELETE ON journal_entries
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
CREATE TRIGGER postings_append_only BEFORE UPDATE OR DELETE ON postings
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
CREATE TRIGGER operation_transitions_append_only BEFORE UPDATE OR DELETE ON operation_transitions
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
CREATE TRIGGER operations_no_delete BEFORE DELETE ON operations
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
CREATE TRIGGER journal_entries_no_truncate BEFORE TRUNCATE ON journal_entries
  FOR EACH STATEMENT EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
CREATE TRIGGER postings_no_truncate BEFORE TRUNCATE ON postings
  FOR EACH STATEMENT EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint

-- Every journal entry sums to zero per asset, checked at commit so an entry's postings can be
-- inserted one by one within its transaction (C11).
CREATE FUNCTION idem_check_entry_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  unbalanced text;
BEGIN
  SELECT asset_code INTO unbalanced FROM postings
   WHERE tenant_id = NEW.tenant_id AND entry_id = NEW.entry_id
   GROUP BY asset_code HAVING sum(amount) <> 0 LIMIT 1;
  IF unbalanced IS NOT NULL THEN
    RAISE EXCEPTION 'idem: journal entry % does not balance in %', NEW.entry_id, unbalanced
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER postings_balanced AFTER INSERT ON postings
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION idem_check_entry_balanced();
--> statement-breakpoint

-- Operations: identity and the approved payload never change (C02); the signed artifact is
-- written once (C12); the version grows by one with every change; the lease generation never
-- goes back; a key may only expire, into its digest, once the operation is settled (C07).
CREATE FUNCTION idem_guard_operation_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
     OR NEW.operation_id IS DISTINCT FROM OLD.operation_id
     OR NEW.kind IS DISTINCT FROM OLD.kind
     OR NEW.reference IS DISTINCT FROM OLD.reference
     OR NEW.account_ref IS DISTINCT FROM OLD.account_ref
     OR NEW.asset_code IS DISTINCT FROM OLD.asset_code
     OR NEW.network IS DISTINCT FROM OLD.network
     OR NEW.destination IS DISTINCT FROM OLD.destination
     OR NEW.memo IS DISTINCT FROM OLD.memo
     OR NEW.amount_minor IS DISTINCT FROM OLD.amount_minor
     OR NEW.fee_cap_minor IS DISTINCT FROM OLD.fee_cap_minor
     OR NEW.policy_version IS DISTINCT FROM OLD.policy_version
     OR NEW.payload_hash IS DISTINCT FROM OLD.payload_hash
     OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
    RAISE EXCEPTION 'idem: operation % identity and approved payload are immutable', OLD.operation_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key THEN
    IF OLD.state NOT IN ('REJECTED', 'CONFIRMED', 'VERIFIED_NOT_SENT')
       OR OLD.settled_at IS NULL
       OR OLD.key_expired_at IS NOT NULL
       OR NEW.idempotency_key <> 'expired:' || encode(sha256(convert_to(OLD.idempotency_key, 'UTF8')), 'hex') THEN
      RAISE EXCEPTION 'idem: the key of operation % cannot change (only a settled operation''s key may expire)', OLD.operation_id
        USING ERRCODE = 'integrity_constraint_violation';
    END IF;
  END IF;
  IF OLD.signed_artifact IS NOT NULL AND NEW.signed_artifact IS DISTINCT FROM OLD.signed_artifact THEN
    RAISE EXCEPTION 'idem: operation % is already signed; the stored bytes are final', OLD.operation_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF OLD.tx_hash IS NOT NULL AND NEW.tx_hash IS DISTINCT FROM OLD.tx_hash THEN
    RAISE EXCEPTION 'idem: operation % transaction hash is final', OLD.operation_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.version <> OLD.version + 1 THEN
    RAISE EXCEPTION 'idem: operation % update must advance version by one', OLD.operation_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.lease_generation < OLD.lease_generation THEN
    RAISE EXCEPTION 'idem: operation % lease generation cannot go back', OLD.operation_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $$;
--> statement-breakpoint
CREATE TRIGGER operations_guard BEFORE UPDATE ON operations
  FOR EACH ROW EXECUTE FUNCTION idem_guard_operation_update();
