/** The signer side of tests: a SoftHSM2 token in a temporary directory, and approvals to sign with. */

export { approvalFor } from './approval.ts';
export { initSoftHsmToken, type SoftHsmToken, softHsmModulePath, tokenKey } from './softhsm.ts';
