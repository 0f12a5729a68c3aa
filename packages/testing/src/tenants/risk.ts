import { type Database, type RiskPolicyInput, setRiskPolicyAsOperator } from '@idem/core';

/**
 * An asset's risk rule as the deployment's own tools set it (the tables' owner, through core's
 * setRiskPolicyAsOperator), so a fixture may start from any rule, one that auto-approves included.
 * The application's role only tightens a rule, or loosens it as the apply step of an approved,
 * due control change (core/sql/idem_guard_risk_policy_write.sql): tests of the staff screens and
 * of control changes go through those paths instead. Recorded as changed by `test` unless `actor`
 * says otherwise.
 */
export function provisionRiskPolicy(
  db: Database,
  rule: Omit<RiskPolicyInput, 'actor'> & { actor?: string },
): Promise<{ changed: boolean; policyVersion: number }> {
  return setRiskPolicyAsOperator(db, { actor: 'test', ...rule });
}
