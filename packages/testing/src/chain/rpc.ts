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
