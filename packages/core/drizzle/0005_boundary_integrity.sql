-- Invariants of the boundary tables: FORCE row-level security, narrow grants, append-only
-- approvals, and final-once-set chain nonce and custodian reference on operations.
ALTER TABLE approvals FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE risk_policies FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE hot_wallets FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE reconciliation_breaks FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
GRANT SELECT, INSERT ON approvals TO idem_app;
--> statement-breakpoint
GRANT SELECT, INSERT, UPDATE ON risk_policies TO idem_app;
--> statement-breakpoint
GRANT SELECT, INSERT ON hot_wallets TO idem_app;
--> statement-breakpoint
GRANT UPDATE (next_nonce) ON hot_wallets TO idem_app;
--> statement-breakpoint
GRANT SELECT, INSERT ON reconciliation_breaks TO idem_app;
--> statement-breakpoint
GRANT UPDATE (status, closed_at, closed_by, closure_evidence, owner) ON reconciliation_breaks TO idem_app;
--> statement-breakpoint
CREATE TRIGGER approvals_append_only BEFORE UPDATE OR DELETE ON approvals
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
-- A nonce is never handed out twice: it only grows.
CREATE FUNCTION idem_guard_hot_wallet_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.next_nonce < OLD.next_nonce OR NEW.address IS DISTINCT FROM OLD.address THEN
    RAISE EXCEPTION 'idem: hot wallet % nonce cannot go back and its address cannot change', OLD.address
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $$;
--> statement-breakpoint
CREATE TRIGGER hot_wallets_guard BEFORE UPDATE ON hot_wallets
  FOR EACH ROW EXECUTE FUNCTION idem_guard_hot_wallet_update();
--> statement-breakpoint
-- A closed break stays closed: its evidence is part of the audit trail.
CREATE FUNCTION idem_guard_break_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.status = 'closed' THEN
    RAISE EXCEPTION 'idem: reconciliation break % is closed', OLD.break_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.break_class IS DISTINCT FROM OLD.break_class OR NEW.subject IS DISTINCT FROM OLD.subject
     OR NEW.details IS DISTINCT FROM OLD.details OR NEW.opened_at IS DISTINCT FROM OLD.opened_at THEN
    RAISE EXCEPTION 'idem: a reconciliation break''s finding is immutable'
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $$;
--> statement-breakpoint
CREATE TRIGGER reconciliation_breaks_guard BEFORE UPDATE ON reconciliation_breaks
  FOR EACH ROW EXECUTE FUNCTION idem_guard_break_update();
--> statement-breakpoint
CREATE TRIGGER reconciliation_breaks_no_delete BEFORE DELETE ON reconciliation_breaks
  FOR EACH ROW EXECUTE FUNCTION idem_refuse_change();
--> statement-breakpoint
-- The chain nonce and the custodian's reference, once recorded, are final (C12, C16).
CREATE FUNCTION idem_guard_operation_boundary() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.chain_nonce IS NOT NULL AND NEW.chain_nonce IS DISTINCT FROM OLD.chain_nonce THEN
    RAISE EXCEPTION 'idem: operation % chain nonce is final', OLD.operation_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF OLD.provider_ref IS NOT NULL AND NEW.provider_ref IS DISTINCT FROM OLD.provider_ref THEN
    RAISE EXCEPTION 'idem: operation % custodian reference is final', OLD.operation_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $$;
--> statement-breakpoint
CREATE TRIGGER operations_guard_boundary BEFORE UPDATE ON operations
  FOR EACH ROW EXECUTE FUNCTION idem_guard_operation_boundary();
--> statement-breakpoint
-- Workers must find which tenants have work without reading across tenants. A NOLOGIN role may
-- read only (tenant_id, state, updated_at) of operations and owns one SECURITY DEFINER function
-- that returns tenant ids, nothing else. The application role can call it, never read the rows.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'idem_scheduler') THEN
    CREATE ROLE idem_scheduler NOLOGIN NOSUPERUSER NOBYPASSRLS;
  END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;
--> statement-breakpoint
GRANT USAGE ON SCHEMA public TO idem_scheduler;
--> statement-breakpoint
GRANT SELECT (tenant_id, state, updated_at) ON operations TO idem_scheduler;
--> statement-breakpoint
GRANT SELECT (tenant_id, status, available_at) ON work_items TO idem_scheduler;
--> statement-breakpoint
CREATE POLICY scheduler_tenants ON operations AS PERMISSIVE FOR SELECT TO idem_scheduler USING (true);
--> statement-breakpoint
CREATE POLICY scheduler_tenants ON work_items AS PERMISSIVE FOR SELECT TO idem_scheduler USING (true);
--> statement-breakpoint
CREATE FUNCTION idem_tenants_with_work(reorg_window_seconds integer)
  RETURNS TABLE (tenant_id uuid)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
  SELECT o.tenant_id FROM operations o
   WHERE o.state IN ('REQUESTED', 'APPROVED', 'SIGNING', 'SIGNED', 'BROADCAST', 'UNKNOWN')
      OR (o.state = 'CONFIRMED' AND o.updated_at > now() - make_interval(secs => reorg_window_seconds))
  UNION
  SELECT w.tenant_id FROM work_items w WHERE w.status = 'pending' AND w.available_at <= now()
$$;
--> statement-breakpoint
ALTER FUNCTION idem_tenants_with_work(integer) OWNER TO idem_scheduler;
--> statement-breakpoint
REVOKE ALL ON FUNCTION idem_tenants_with_work(integer) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION idem_tenants_with_work(integer) TO idem_app;
