/** Test helpers other packages use against the real rails: a fault proxy and the simulator process. */
export { type FaultProxy, type ProxyFault, startFaultProxy } from './fault-proxy.ts';
export { type SimulatorProcess, spawnSimulator } from './simulator-process.ts';
