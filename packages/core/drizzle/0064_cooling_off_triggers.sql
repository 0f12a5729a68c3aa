-- A member who joins (accepts an invitation) or changes role approves only after the tenant's
-- cooling-off period: the database sets approvals_from (the application role has no grant on it)
-- and refuses an approval made before it.
CREATE TRIGGER staff_users_approvals_from BEFORE UPDATE ON staff_users
  FOR EACH ROW EXECUTE FUNCTION idem_staff_approvals_from();
--> statement-breakpoint
CREATE TRIGGER approvals_cooling_off BEFORE INSERT ON approvals
  FOR EACH ROW EXECUTE FUNCTION idem_guard_cooling_off_approval();
--> statement-breakpoint
CREATE TRIGGER proposal_decisions_cooling_off BEFORE INSERT ON proposal_decisions
  FOR EACH ROW EXECUTE FUNCTION idem_guard_cooling_off_approval();
