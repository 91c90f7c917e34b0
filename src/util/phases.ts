// Where a job's wall-clock time goes: seconds per named phase (reading, training, held-out scoring, the
// re-ranker, saving, ...), as `train --json` reports them in `phases`. Names are flat, with a dot for a
// phase inside another one's work that is reported on its own (`selection.train` is the selection copy's
// training, not part of `train`); a phase entered again adds to its total. Only wall-clock time: what runs
// on worker threads inside a phase counts once, as the time the phase took.

/** Seconds per phase, in the order the phases were first entered. */
export type PhaseSeconds = Record<string, number>;

export class PhaseTimer {
  /**
   * @param prefix prepended to every name (a selection copy's phases: 'selection.')
   * @param totals the totals written into (a nested timer shares its parent's)
   * @param onEnter told the full name of every phase that starts (start, time), e.g. to show it in progress output
   */
  constructor(
    private readonly prefix = '',
    private readonly totals = new Map<string, number>(),
    readonly onEnter?: (name: string) => void,
  ) {}

  /** Adds `seconds` to phase `name`. */
  add(name: string, seconds: number): void {
    const key = this.prefix + name;
    this.totals.set(key, (this.totals.get(key) ?? 0) + seconds);
  }

  /** Starts phase `name`: the returned function ends it and adds its wall-clock seconds. */
  start(name: string): () => void {
    this.onEnter?.(this.prefix + name);
    const t0 = performance.now();
    return () => this.add(name, (performance.now() - t0) / 1000);
  }

  /** Runs `fn` as phase `name` (its seconds are added also when it throws). */
  async time<T>(name: string, fn: () => Promise<T> | T): Promise<T> {
    const end = this.start(name);
    try {
      return await fn();
    } finally {
      end();
    }
  }

  /** A timer writing into the same totals (and telling the same listener) under this one's prefix + `prefix`. */
  nested(prefix: string): PhaseTimer {
    return new PhaseTimer(this.prefix + prefix, this.totals, this.onEnter);
  }

  /** The totals so far, in seconds rounded to the millisecond. */
  snapshot(): PhaseSeconds {
    const out: PhaseSeconds = {};
    for (const [k, v] of this.totals) out[k] = Math.round(v * 1000) / 1000;
    return out;
  }
}
