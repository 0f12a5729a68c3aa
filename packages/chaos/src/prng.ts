/**
 * A small seeded pseudo-random generator (sfc32, seeded through splitmix32). Every random choice
 * a chaos run makes, from the fault schedule to each client's next action, comes from one of
 * these, so a seed names a run. `fork(label)` derives an independent stream per concern: adding a
 * client or a fault kind does not shift the choices of the others.
 */
export class Prng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(readonly seed: number) {
    if (!Number.isSafeInteger(seed) || seed < 0)
      throw new Error(`seed must be a non-negative integer: ${seed}`);
    let state = (seed ^ Math.floor(seed / 2 ** 32)) >>> 0;
    const next = (): number => {
      state = (state + 0x9e3779b9) >>> 0;
      let z = state;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.a = next();
    this.b = next();
    this.c = next();
    this.d = next();
    // Discard the first outputs: sfc32 mixes slowly from similar states.
    for (let i = 0; i < 12; i += 1) this.nextUint32();
  }

  nextUint32(): number {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0;
    this.d = (this.d + 1) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0;
    this.c = (this.c + t) >>> 0;
    return t;
  }

  /** A float in [0, 1). */
  next(): number {
    return this.nextUint32() / 2 ** 32;
  }

  /** An integer in [min, max], both included. */
  int(min: number, max: number): number {
    if (max < min) throw new Error(`empty range [${min}, ${max}]`);
    return min + Math.floor(this.next() * (max - min + 1));
  }

  chance(probability: number): boolean {
    return this.next() < probability;
  }

  pick<T>(items: readonly T[]): T {
    const item = items[this.int(0, items.length - 1)];
    if (item === undefined) throw new Error('pick from an empty list');
    return item;
  }

  /** Picks by weight: `[[value, weight], ...]`. */
  weighted<T>(choices: readonly (readonly [T, number])[]): T {
    const total = choices.reduce((sum, [, weight]) => sum + weight, 0);
    let roll = this.next() * total;
    for (const [value, weight] of choices) {
      roll -= weight;
      if (roll < 0) return value;
    }
    const last = choices[choices.length - 1];
    if (!last) throw new Error('weighted pick from an empty list');
    return last[0];
  }

  /** Hex of `bytes` random bytes (for addresses and ids that must be replayable). */
  hex(bytes: number): string {
    let out = '';
    for (let i = 0; i < bytes; i += 1) out += this.int(0, 255).toString(16).padStart(2, '0');
    return out;
  }

  /** An independent stream for one concern, derived from this seed and a label. */
  fork(label: string): Prng {
    let hash = 0x811c9dc5;
    for (const char of `${this.seed}:${label}`) {
      hash ^= char.charCodeAt(0);
      hash = Math.imul(hash, 0x01000193) >>> 0;
    }
    return new Prng((hash * 0x10000 + (this.seed % 0x10000)) % Number.MAX_SAFE_INTEGER);
  }
}
