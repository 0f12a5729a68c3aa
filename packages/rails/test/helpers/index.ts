/** Test helpers other packages use against the real rails: a fault proxy and the simulator process. */

export { approvalFor } from './approval.ts';
export {
  type ActiveRule,
  type FaultProxy,
  type ProxyFault,
  type RpcFaultMode,
  type RpcFaultRule,
  startFaultProxy,
} from './fault-proxy.ts';
export { rpc } from './rpc.ts';
export { type SimulatorProcess, spawnSimulator } from './simulator-process.ts';
export { initSoftHsmToken, type SoftHsmToken, softHsmModulePath, tokenKey } from './softhsm.ts';
