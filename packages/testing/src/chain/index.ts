/** The EVM side of tests: anvil's JSON-RPC called directly, a fault proxy in front of it, and units. */

export {
  type ActiveRule,
  type FaultProxy,
  type ProxyFault,
  type RpcFaultMode,
  type RpcFaultRule,
  startFaultProxy,
} from './fault-proxy.ts';
export { balanceOf, mineUntilFinal, rpc } from './rpc.ts';
export { ETH, GWEI } from './units.ts';
