import { formatMinor, type OperationState } from '@idem/contracts';

export interface AssetInfo {
  code: string;
  network: string;
  decimals: number;
}

/** Exact display units from minor units, with the asset code; never through a float. */
export function displayAmount(amountMinor: string, asset: string, assets: AssetInfo[]): string {
  const info = assets.find((candidate) => candidate.code === asset);
  return info
    ? `${formatMinor(amountMinor, info.decimals)} ${asset}`
    : `${amountMinor} minor units of ${asset}`;
}

/** Every state in plain words for the customer. UNKNOWN is never "failed": the funds are held. */
export function customerStateText(state: OperationState, rejectionCode: string | null): string {
  switch (state) {
    case 'REQUESTED':
      return 'Received; being reviewed';
    case 'APPROVED':
      return 'Approved; preparing to send';
    case 'SIGNING':
    case 'SIGNED':
      return 'Being sent';
    case 'BROADCAST':
      return 'Sent; waiting for network confirmations';
    case 'UNKNOWN':
      return 'Confirming with the network; your funds are held';
    case 'CONFIRMED':
      return 'Completed';
    case 'REJECTED':
      return rejectionCode === 'INSUFFICIENT_FUNDS'
        ? 'Not sent: your available balance was too low; nothing was taken'
        : 'Not sent: declined at review; the funds are back in your balance';
    case 'VERIFIED_NOT_SENT':
      return 'Not sent; the funds are back in your balance';
    case 'FAILED_TERMINAL':
      return 'Delayed; our team is checking it and your funds are held';
    case 'REVERSED':
      return 'Reversed';
  }
}

/** States after which a withdrawal (or a deposit) never moves again: the screens stop polling. */
export function isSettled(state: OperationState): boolean {
  return (
    state === 'CONFIRMED' || state === 'REJECTED' || state === 'VERIFIED_NOT_SENT' || state === 'REVERSED'
  );
}

/**
 * One step of the customer's timeline in plain words (I14-LIVE): the step a state change reached,
 * not the current status sentence. SIGNING and SIGNED are one step to the customer; CONFIRMED says
 * the confirmation depth the asset requires, which is what "confirmed" meant for this withdrawal.
 */
export function customerStepText(
  state: OperationState,
  rejectionCode: string | null,
  confirmations: number | null,
): string {
  switch (state) {
    case 'REQUESTED':
      return 'Requested';
    case 'APPROVED':
      return 'Approved';
    case 'SIGNING':
    case 'SIGNED':
      return 'Being prepared';
    case 'BROADCAST':
      return 'Sent to the network';
    case 'UNKNOWN':
      return 'Checking with the network; funds held';
    case 'CONFIRMED':
      return confirmations === null
        ? 'Confirmed'
        : `Confirmed (${confirmations} ${confirmations === 1 ? 'block' : 'blocks'})`;
    case 'REJECTED':
      return rejectionCode === 'INSUFFICIENT_FUNDS' ? 'Not sent: balance too low' : 'Declined at review';
    case 'VERIFIED_NOT_SENT':
      return 'Not sent; funds returned';
    case 'FAILED_TERMINAL':
      return 'Delayed; our team is checking';
    case 'REVERSED':
      return 'Reversed';
  }
}

/** A deposit's state in words: credited deposits are "Received"; a reorganisation undoes one. */
export function customerDepositText(state: OperationState): string {
  if (state === 'CONFIRMED') return 'Received';
  if (state === 'REVERSED') return 'Reversed by the network; taken back';
  return customerStateText(state, null);
}

/** Badge colours that keep WCAG AA contrast with their (auto-contrasted) text. */
export function stateColor(state: OperationState): string {
  if (state === 'CONFIRMED') return 'teal.9';
  if (state === 'REJECTED' || state === 'VERIFIED_NOT_SENT' || state === 'REVERSED') return 'gray.7';
  if (state === 'UNKNOWN' || state === 'FAILED_TERMINAL') return 'yellow';
  return 'blue.8';
}

export function formatAge(seconds: number): string {
  if (seconds < 90) return `${seconds} s`;
  if (seconds < 90 * 60) return `${Math.round(seconds / 60)} min`;
  if (seconds < 48 * 3600) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86400)} days`;
}

export function formatTime(iso: string): string {
  return new Date(iso).toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'medium' });
}
