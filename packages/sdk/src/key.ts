/**
 * The key for one withdrawal: `withdrawal-<your withdrawal id>`. Derive it from the id you already
 * store, so every retry, restart and redeploy sends the same key (one key per withdrawal, never per
 * attempt). Refuses an empty or blank id, which would make unrelated withdrawals share a key.
 */
export function withdrawalKey(withdrawalId: string | number | bigint): string {
  const id = String(withdrawalId);
  if (id.trim() === '' || id !== id.trim()) {
    throw new TypeError('withdrawalKey: the withdrawal id must be non-empty, without surrounding whitespace');
  }
  return `withdrawal-${id}`;
}
