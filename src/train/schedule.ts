// When to rebuild a sampled layer's hash tables. SLIDE rehashes every 50 batches at first, and the
// paper lets the interval grow as training settles (weights move less, codes change less):
// the n-th rebuild happens `first * growth^n` batches after the previous one, capped at `maxInterval`.

/** Rebuild schedule options. */
export interface RebuildScheduleOptions {
  /** Batches before the first rebuild. Default 50 (SLIDE's 6400 samples at batch 128). */
  first?: number;
  /** Factor by which the interval grows after each rebuild. Default 1.15. */
  growth?: number;
  /** Largest interval in batches. Default 1000. */
  maxInterval?: number;
}

export class RebuildSchedule {
  readonly first: number;
  readonly growth: number;
  readonly maxInterval: number;
  /** Batch count at which the next rebuild is due. */
  next: number;
  interval: number;
  rebuilds = 0;

  constructor(o: RebuildScheduleOptions = {}) {
    this.first = o.first ?? 50;
    this.growth = o.growth ?? 1.15;
    this.maxInterval = o.maxInterval ?? 1000;
    if (!Number.isInteger(this.first) || this.first <= 0) throw new Error(`Expected positive integer for rebuild.first but received ${o.first}`);
    if (!(this.growth >= 1)) throw new Error(`Expected rebuild.growth >= 1 but received ${o.growth}`);
    if (!(this.maxInterval >= this.first)) throw new Error(`Expected rebuild.maxInterval >= rebuild.first but received ${o.maxInterval}`);
    this.interval = this.first;
    this.next = this.first;
  }

  /** True when a rebuild is due after `batchesDone` batches. */
  due(batchesDone: number): boolean {
    return batchesDone >= this.next;
  }

  /** Records a rebuild at `batchesDone` and schedules the next one. */
  done(batchesDone: number): void {
    this.rebuilds++;
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
