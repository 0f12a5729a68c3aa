/** The custodian side of tests: the simulator as its own process, and a receiver for its webhooks. */

export { type SimulatorProcess, spawnSimulator } from './simulator-process.ts';
export * from './webhook-receiver.ts';
