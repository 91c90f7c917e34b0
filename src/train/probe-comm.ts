// The communicator of the sharded timing probe (calibrate.ts probeShard, probe-rank.ts): ranks of a label-sharded
// job emulated in one process, without MPI. Nothing a stand-in computes is a real job's result: an all-reduce
// leaves the rank's own values and an all-gather returns `size` copies of its part (the timing needs the work,
// not the sums). Given a barrier, every collective first waits there for the other threads (polling, then
// asleep: arrive), so that the threads advance step by step as ranks do.
import type { Comm } from './distributed.js';

/** A barrier of `parties` threads on shared memory (Int32Array (3): arrived, generation, abandoned). */
export interface ProbeBarrier {
  state: Int32Array;
  parties: number;
}

export function probeBarrier(parties: number): ProbeBarrier {
  return { state: new Int32Array(new SharedArrayBuffer(12)), parties };
}

/** Marks the barrier abandoned: every thread waiting at it, or arriving later, throws. */
export function abandon(b: ProbeBarrier): void {
  Atomics.store(b.state, 2, 1);
}

/**
 * Waits until every party has arrived: spinning a little (as MPI's shared-memory collectives poll), then asleep
 * in Atomics.wait (1 ms at most per wait; the last to arrive wakes the others), as a polling MPI rank yields its
 * core; throws when the barrier was abandoned or after `timeoutMs`. A thread that only spun held its core while
 * the other rank's thread waited for one: on a loaded 2-vCPU machine the probe then measured a rank beside
 * another at 5.5 to 8.0 times its speed alone where the 2-rank runs of the same minutes ran at 1.3 to 1.9 times
 * (docs/planning.md).
 */
export function arrive(b: ProbeBarrier, timeoutMs = 20_000): void {
  const s = b.state;
  const gen = Atomics.load(s, 1);
  if (Atomics.add(s, 0, 1) === b.parties - 1) {
    Atomics.store(s, 0, 0);
    Atomics.add(s, 1, 1);
    Atomics.notify(s, 1);
    return;
  }
  const t0 = performance.now();
  for (let i = 0; Atomics.load(s, 1) === gen; i++) {
    if (i >= SPINS) Atomics.wait(s, 1, gen, 1);
    if ((i & 1023) === 0 && (Atomics.load(s, 2) !== 0 || performance.now() - t0 > timeoutMs)) {
      abandon(b);
      throw new Error('the sharded probe\'s other rank stopped');
    }
  }
}

/** Polls of the barrier before a waiting thread sleeps (a few microseconds). */
const SPINS = 2048;

/** The stand-in communicator of rank `rank` of `size`; with a barrier, each collective waits there first. */
export function probeComm(size: number, rank = 0, barrier?: ProbeBarrier): Comm {
  const sync = () => {
    if (barrier) arrive(barrier);
  };
  return {
    rank, size,
    allreduceSum: () => sync(),
    allgatherv: (b: Uint8Array) => {
      sync();
      const out = new Uint8Array(b.byteLength * size);
      for (let r = 0; r < size; r++) out.set(b, r * b.byteLength);
      return { data: out, counts: new Array<number>(size).fill(b.byteLength) };
    },
    bcast: () => sync(),
    barrier: () => sync(),
    idleBarrier: () => sync(),
    abort: () => {
      throw new Error('the sharded probe cannot abort');
    },
  };
}
