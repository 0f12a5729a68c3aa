import { ROLE_PERMISSIONS, type SetRiskRuleInput, type StaffRole } from '@idem/contracts';

/** A risk rule as stored, or null when the asset has none (every withdrawal then needs a person). */
export interface RuleInForce {
  autoApproveMaxMinor: string;
  fourEyesMinMinor: string;
  velocityMaxPerHour: number;
}

/**
 * Whether a new rule loosens the one in force: a higher auto-approve limit lets more through
 * without a person, a higher four-eyes threshold lets more through with one, a higher velocity lets
 * more through at all. Any one of them makes the change a loosening, whatever the others do. With
 * no rule in force nothing is auto-approved, so a rule auto-approving anything loosens.
 */
export function riskRuleLoosens(current: RuleInForce | null, next: SetRiskRuleInput): boolean {
  if (!current) return BigInt(next.autoApproveMaxMinor) > 0n;
  return (
    BigInt(next.autoApproveMaxMinor) > BigInt(current.autoApproveMaxMinor) ||
    BigInt(next.fourEyesMinMinor) > BigInt(current.fourEyesMinMinor) ||
    next.velocityMaxPerHour > current.velocityMaxPerHour
  );
}

/** Whether moving a member from one role to another gives them any permission they lacked. */
export function roleLoosens(from: StaffRole, to: StaffRole): boolean {
  return Object.values(ROLE_PERMISSIONS).some(
    (roles) =>
      (roles as readonly StaffRole[]).includes(to) && !(roles as readonly StaffRole[]).includes(from),
  );
}
