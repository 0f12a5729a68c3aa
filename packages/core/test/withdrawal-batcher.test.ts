import { describe, expect, it, vi } from 'vitest';
import {
  type BatchingOptions,
  type Settled,
  SubmissionBatcher,
} from '../src/operations/withdrawal-batcher.ts';

/**
 * When the batcher sends a submission: at once while its group has a batch slot free,
 * else gathered behind the batch being written, until a slot frees, `maxItems` of the group wait,
 * or the oldest has waited `maxWaitMs`. A group is one tenant and actor; groups never wait on each
 * other. The writer here is a stand-in that records each batch and is finished by the test, so
 * the timing is the test's, not a database's.
 */
interface Item {
  group: string;
  n: number;
}

function harness(settings: Omit<BatchingOptions, 'gatherFrom'> & { gatherFrom?: number }) {
  // Gathering from the second submission unless a test says otherwise: the rules below, not the light-load one.
  const options: BatchingOptions = { gatherFrom: 1, ...settings };
  const batches: { items: Item[]; finish(): void }[] = [];
  const batcher = new SubmissionBatcher<Item, string>(
    options,
    (item) => item.group,
    (items) =>
      new Promise<Settled<string>[]>((resolve) => {
        batches.push({
          items,
          finish: () => resolve(items.map((item) => ({ ok: true, claim: `${item.group}${item.n}` }))),
        });
      }),
  );
  const sent = () => batches.map((batch) => batch.items.map((item) => `${item.group}${item.n}`).join(','));
  return { batcher, batches, sent };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('the submission batcher', () => {
  it('I17 an idle group sends a submission at once, alone', async () => {
    const { batcher, batches, sent } = harness({ maxItems: 64, maxWaitMs: 60_000, concurrency: 1 });
    const answer = batcher.submit({ group: 'a', n: 1 });
    expect(sent()).toEqual(['a1']);
    batches[0]?.finish();
    expect(await answer).toBe('a1');
  });

  it('I17 while a group has a batch in flight, its next submissions gather and go together when it commits', async () => {
    const { batcher, batches, sent } = harness({ maxItems: 64, maxWaitMs: 60_000, concurrency: 1 });
    const answers = [1, 2, 3, 4].map((n) => batcher.submit({ group: 'a', n }));
    expect(sent()).toEqual(['a1']);
    batches[0]?.finish();
    await settle();
    expect(sent()).toEqual(['a1', 'a2,a3,a4']);
    batches[1]?.finish();
    expect(await Promise.all(answers)).toEqual(['a1', 'a2', 'a3', 'a4']);
  });

  it("I17 another tenant's submission does not wait behind a group's batch in flight", async () => {
    const { batcher, batches, sent } = harness({ maxItems: 64, maxWaitMs: 60_000, concurrency: 1 });
    const first = batcher.submit({ group: 'a', n: 1 });
    const waiting = batcher.submit({ group: 'a', n: 2 });
    const other = batcher.submit({ group: 'b', n: 1 });
    // b1 could never share a statement with a's items: it goes out beside a1, a2 keeps waiting.
    expect(sent()).toEqual(['a1', 'b1']);
    batches[1]?.finish();
    expect(await other).toBe('b1');
    expect(sent()).toEqual(['a1', 'b1']);
    batches[0]?.finish();
    await settle();
    expect(sent()).toEqual(['a1', 'b1', 'a2']);
    batches[2]?.finish();
    expect(await Promise.all([first, waiting])).toEqual(['a1', 'a2']);
  });

  it('I17 a waiting submission goes out after maxWaitMs even while its group has no slot free', async () => {
    const { batcher, batches, sent } = harness({ maxItems: 64, maxWaitMs: 5, concurrency: 1 });
    void batcher.submit({ group: 'a', n: 1 });
    const late = batcher.submit({ group: 'a', n: 2 });
    expect(sent()).toEqual(['a1']);
    // Its timer fires 5 ms on; a1 is still in flight.
    await vi.waitFor(() => expect(sent()).toEqual(['a1', 'a2']), { timeout: 2_000, interval: 5 });
    batches[1]?.finish();
    expect(await late).toBe('a2');
  });

  it('I17 maxItems waiting submissions of a group go out at once as one batch', async () => {
    const { batcher, sent } = harness({ maxItems: 3, maxWaitMs: 60_000, concurrency: 1 });
    for (const n of [1, 2, 3, 4, 5, 6]) void batcher.submit({ group: 'a', n });
    // a1 went alone; a2..a4 filled a batch the moment a4 arrived; a5 and a6 wait for a slot.
    expect(sent()).toEqual(['a1', 'a2,a3,a4']);
    void batcher.submit({ group: 'a', n: 7 });
    expect(sent()).toEqual(['a1', 'a2,a3,a4', 'a5,a6,a7']);
  });

  it('I17 under light load (fewer than gatherFrom in flight and waiting) a submission goes at once even with no slot free', async () => {
    const { batcher, batches, sent } = harness({
      maxItems: 64,
      maxWaitMs: 60_000,
      concurrency: 1,
      gatherFrom: 4,
    });
    const answers = [1, 2, 3].map((n) => batcher.submit({ group: 'a', n }));
    // Three of the group in flight and waiting: a batch would cost more than the calls alone.
    expect(sent()).toEqual(['a1', 'a2', 'a3']);
    // The fourth has company enough: it waits for a slot, and the ones after it gather with it.
    void batcher.submit({ group: 'a', n: 4 });
    void batcher.submit({ group: 'a', n: 5 });
    expect(sent()).toEqual(['a1', 'a2', 'a3']);
    // a1 done: a2, a3 in flight and a4, a5 waiting are still four, so they keep waiting.
    batches[0]?.finish();
    await settle();
    expect(sent()).toEqual(['a1', 'a2', 'a3']);
    // a2 done: three left in all, too few for a batch to pay, so the two waiting go now, together.
    batches[1]?.finish();
    await settle();
    expect(sent()).toEqual(['a1', 'a2', 'a3', 'a4,a5']);
    for (const batch of batches.slice(2)) batch.finish();
    expect(await Promise.all(answers)).toEqual(['a1', 'a2', 'a3']);
  });

  it('I17 each batch is reported once it is answered: its size and its time from send to answer', async () => {
    const reported: [number, number][] = [];
    const finishers: (() => void)[] = [];
    const batcher = new SubmissionBatcher<Item, string>(
      { maxItems: 64, maxWaitMs: 60_000, concurrency: 1, gatherFrom: 1 },
      (item) => item.group,
      (items) =>
        new Promise<Settled<string>[]>((resolve) => {
          finishers.push(() => resolve(items.map((item) => ({ ok: true, claim: `${item.group}${item.n}` }))));
        }),
      (items, seconds) => reported.push([items, seconds]),
    );
    const answers = [1, 2, 3].map((n) => batcher.submit({ group: 'a', n }));
    expect(reported).toEqual([]);
    // Fixed: the first batch's measured time is what is checked below; these 20 ms are that time.
    await sleep(20);
    finishers[0]?.();
    await settle();
    finishers[1]?.();
    await Promise.all(answers);
    await settle();
    expect(reported.map(([items]) => items)).toEqual([1, 2]);
    expect(reported[0]?.[1]).toBeGreaterThanOrEqual(0.015);
  });

  it('I17 with concurrency 2 a group writes two batches at once before it gathers', async () => {
    const { batcher, batches, sent } = harness({ maxItems: 64, maxWaitMs: 60_000, concurrency: 2 });
    for (const n of [1, 2, 3, 4]) void batcher.submit({ group: 'a', n });
    expect(sent()).toEqual(['a1', 'a2']);
    batches[1]?.finish();
    await settle();
    expect(sent()).toEqual(['a1', 'a2', 'a3,a4']);
  });
});
