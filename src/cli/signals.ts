// How a long command stops when asked to: SIGINT (Ctrl-C) and SIGTERM (what Slurm, Kubernetes and
// systemd send, then SIGKILL after a grace period) both stop training after the batches in flight, write
// the checkpoint and save the model; a second signal exits at once. The exit code then says which signal
// stopped the run, as a shell reports a process killed by it: 128 + 2 = 130 (SIGINT), 128 + 15 = 143
// (SIGTERM), so that job schedulers and scripts see an interrupted run, not a finished one.

const EXIT_CODES = { SIGINT: 130, SIGTERM: 143 } as const;
export type StopSignal = keyof typeof EXIT_CODES;

/** The exit code of a run stopped by `signal` ('SIGINT' 130, 'SIGTERM' 143), or undefined for another reason. */
export function exitCodeOf(signal: string): number | undefined {
  return signal in EXIT_CODES ? EXIT_CODES[signal as StopSignal] : undefined;
}

export class GracefulStop {
  readonly controller = new AbortController();
  /** The first signal received, or null. */
  received: StopSignal | null = null;
  private readonly handlers = new Map<NodeJS.Signals, () => void>();

  /**
   * `announce` prints what happens now (called once, on the first signal; the abort reason names the signal);
   * `forced`, on a second signal just before the process exits, prints what that loses (what is not saved,
   * where the last saved state is).
   */
  constructor(private readonly announce: (signal: StopSignal) => void, private readonly forced?: (signal: StopSignal) => void) {}

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /**
   * Starts listening for SIGINT and SIGTERM (replacing Node's default of exiting at once); with `forwarded`,
   * also for SIGUSR1 and SIGUSR2, taken as SIGINT and SIGTERM: the signals Open MPI's mpirun forwards to every
   * rank (it does not forward SIGINT or SIGTERM).
   */
  install(forwarded = false): this {
    const map: [NodeJS.Signals, StopSignal][] = [['SIGINT', 'SIGINT'], ['SIGTERM', 'SIGTERM'], ...(forwarded ? [['SIGUSR1', 'SIGINT'], ['SIGUSR2', 'SIGTERM']] as [NodeJS.Signals, StopSignal][] : [])];
    for (const [os, sig] of map) {
      const h = () => {
        if (this.received) {
          // The second signal: stop now, saying what is lost (a write in progress is atomic: its file is
          // either whole or absent, so nothing half-written is left to be mistaken for a result).
          this.forced?.(sig);
          process.exit(EXIT_CODES[sig]);
        }
        this.received = sig;
        this.announce(sig);
        this.controller.abort(sig);
      };
      this.handlers.set(os, h);
      process.on(os, h);
    }
    return this;
  }

  uninstall(): void {
    for (const [sig, h] of this.handlers) process.off(sig, h);
    this.handlers.clear();
  }

  /** The exit code of a run stopped by a signal (130 or 143), or `otherwise`. */
  exitCode(otherwise = 0): number {
    return this.received ? EXIT_CODES[this.received] : otherwise;
  }
}
