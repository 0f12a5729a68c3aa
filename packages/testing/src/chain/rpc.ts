/** Calls a node's JSON-RPC directly, for anvil's test-only methods (mine, drop, reorg) and raw checks. */
export async function rpc<T = unknown>(url: string, method: string, params: unknown[] = []): Promise<T> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    signal: AbortSignal.timeout(5_000),
  });
  const body = (await response.json()) as { result?: T; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}

export async function balanceOf(url: string, address: string): Promise<bigint> {
  return BigInt(await rpc<string>(url, 'eth_getBalance', [address, 'latest']));
}

/**
 * Mines until the node calls `blockNumber` finalized, without assuming how far behind its head the
 * finalized block is (anvil: 64, and 0 while the chain is shorter). Past the lag the finalized block
 * moves with the head, so the first round mines exactly what it lacks; on a shorter chain it has
 * not moved, and each further round mines at least twice as many blocks as the last.
 */
export async function mineUntilFinal(url: string, blockNumber: bigint | number): Promise<void> {
  const target = BigInt(blockNumber);
  let step = 0n;
  for (let round = 0; round < 12; round++) {
    const block = await rpc<{ number: string }>(url, 'eth_getBlockByNumber', ['finalized', false]);
    const finalized = BigInt(block.number);
    if (finalized >= target) return;
    step = target - finalized > 2n * step ? target - finalized : 2n * step;
    await rpc(url, 'anvil_mine', [`0x${step.toString(16)}`]);
  }
  throw new Error(`block ${target} is still not final after 12 rounds of mining`);
}
