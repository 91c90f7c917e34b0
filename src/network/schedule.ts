// When to rebuild a sampled layer's hash tables. SLIDE rehashes every 50 batches at first, and the
// paper lets the interval grow as training settles (weights move less, codes change less):
// the n-th rebuild happens `first * growth^n` batches after the previous one, capped at `maxInterval`.
import { boundJson } from '../util/bounded-text.js';

import { checkKnownKeys } from '../util/suggest.js';

/** Rebuild schedule options. */
export interface RebuildScheduleOptions {
  /** Batches before the first rebuild. Default 50 (SLIDE's 6400 samples at batch 128). */
  first?: number;
  /** Factor by which the interval grows after each rebuild. Default 1.15. */
  growth?: number;
  /** Largest interval in batches. Default 1000. */
  maxInterval?: number;
  /**
   * 'schedule': rebuild at the growing intervals above. 'change' (as MONGOOSE does): every `checkEvery`
   * batches, rehash a fixed sample of neurons and rebuild only when at least `threshold` of their
   * (neuron, table) codes differ from the codes in the tables. Default 'schedule'.
   */
  policy?: 'schedule' | 'change';
  /** 'change' policy: batches between checks. Default 50. */
  checkEvery?: number;
  /** 'change' policy: neurons rehashed per check (per sampled layer). Default 1024. */
  sample?: number;
  /** 'change' policy: fraction of changed codes that triggers a rebuild, in (0, 1]. Default 0.1. */
  threshold?: number;
}

export const REBUILD_KEYS = ['first', 'growth', 'maxInterval', 'policy', 'checkEvery', 'sample', 'threshold'] as const satisfies readonly (keyof RebuildScheduleOptions)[];

export class RebuildSchedule {
  readonly first: number;
  readonly growth: number;
  readonly maxInterval: number;
  readonly policy: 'schedule' | 'change';
  readonly checkEvery: number;
  readonly sample: number;
  readonly threshold: number;
  /** Batch count at which the next rebuild is due. */
  next: number;
  interval: number;
  rebuilds = 0;

  constructor(o: RebuildScheduleOptions = {}) {
    if (o === null || typeof o !== 'object' || Array.isArray(o)) throw new Error(`Expected an object for rebuild but received ${JSON.stringify(o)}`);
    checkKnownKeys(o, REBUILD_KEYS, 'rebuild', (m) => new Error(m));
    this.first = o.first ?? 50;
    this.growth = o.growth ?? 1.15;
    this.maxInterval = o.maxInterval ?? 1000;
    if (!Number.isInteger(this.first) || this.first <= 0) throw new Error(`Expected positive integer for rebuild.first but received ${o.first}`);
    if (!(this.growth >= 1)) throw new Error(`Expected rebuild.growth >= 1 but received ${o.growth}`);
    if (!(this.maxInterval >= this.first)) throw new Error(`Expected rebuild.maxInterval >= rebuild.first but received ${o.maxInterval}`);
    this.policy = o.policy ?? 'schedule';
    this.checkEvery = o.checkEvery ?? 50;
    this.sample = o.sample ?? 1024;
    this.threshold = o.threshold ?? 0.1;
    if (this.policy !== 'schedule' && this.policy !== 'change') throw new Error(`Expected 'schedule' or 'change' for rebuild.policy but received ${boundJson(o.policy)}`);
    if (!Number.isInteger(this.checkEvery) || this.checkEvery <= 0) throw new Error(`Expected positive integer for rebuild.checkEvery but received ${o.checkEvery}`);
    if (!Number.isInteger(this.sample) || this.sample <= 0) throw new Error(`Expected positive integer for rebuild.sample but received ${o.sample}`);
    if (!(this.threshold > 0 && this.threshold <= 1)) throw new Error(`Expected rebuild.threshold in (0, 1] but received ${o.threshold}`);
    this.interval = this.policy === 'change' ? this.checkEvery : this.first;
    this.next = this.interval;
  }

  /** The options this schedule was made with (stored in checkpoints). */
  options(): Required<RebuildScheduleOptions> {
    return { first: this.first, growth: this.growth, maxInterval: this.maxInterval, policy: this.policy, checkEvery: this.checkEvery, sample: this.sample, threshold: this.threshold };
  }

  /** True when a rebuild is due after `batchesDone` batches. */
  due(batchesDone: number): boolean {
    return batchesDone >= this.next;
  }

  /**
   * Records the scheduled point at `batchesDone` (`rebuilt`: whether the tables were rebuilt; under the
   * 'change' policy a check may find too little drift) and schedules the next one.
   */
  done(batchesDone: number, rebuilt = true): void {
    if (rebuilt) this.rebuilds++;
    if (this.policy === 'change') {
      this.next = batchesDone + this.checkEvery;
      return;
    }
    this.interval = Math.min(this.maxInterval, Math.max(1, Math.round(this.interval * this.growth)));
    this.next = batchesDone + this.interval;
  }

  state() {
    return { next: this.next, interval: this.interval, rebuilds: this.rebuilds };
  }
  restore(s: { next: number; interval: number; rebuilds: number }) {
    this.next = s.next;
    this.interval = s.interval;
    this.rebuilds = s.rebuilds;
  }
}
