// An error in how something was asked (a flag, a job option, a combination of them), not in the data or
// the machine: the CLI prints it with a pointer to --help and exits 2; every other error exits 1.

/**
 * A mistake in the options of a job or command: the message names the option (as its flag, e.g. `--lr`).
 *
 * @example
 * ```ts
 * try { await train({ train: 'train.txt', lr: -1 }); }
 * catch (e) { if (e instanceof UsageError) console.error(e.message); else throw e; } // option --lr must be > 0
 * ```
 */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}
