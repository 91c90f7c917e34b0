// How a job (train, eval, predict) reports while it runs. A library call prints nothing by itself: the
// caller says what to do with each kind of report, and the CLI prints them on stderr (src/cli/report.ts).

/** A display of one operation's progress; src/util/progress.ts's Progress is one. */
export interface ProgressSink {
  /** `done` units of `total` (omitted when unknown), and a free-form suffix. */
  update(done: number, total?: number, extra?: string): void;
  /** Erases the display before a message is printed (the next update redraws it). */
  clear(): void;
  /** The operation is over. */
  done(extra?: string): void;
}

/** What a job reports. Every callback is optional. */
export interface JobEvents {
  /** A line about the job: what is read, the network and its plan, epoch results, what training chose. */
  onInfo?: (line: string) => void;
  /** Something the caller should know that does not stop the job (the CLI prints `sublinear: warning: ...`). */
  onWarning?: (message: string) => void;
  /** Starts the display of a long operation (reading a file: MB; training: batches; predicting: points). */
  progress?: (label: string, unit: string) => ProgressSink;
}

/** No reports: the ranks of an MPI job other than rank 0 (rank 0 reports for the job). */
export const SILENT: JobEvents = {};

/**
 * A job's reports, silenced where `quiet` says (the job's `quiet`: no progress and no information, while
 * warnings and notices still come), with the progress display in use cleared before any line.
 */
export class Reporter {
  private active: ProgressSink | null = null;

  constructor(readonly events: JobEvents, readonly quiet: boolean) {}

  /** An information line, unless quiet. */
  say(line: string): void {
    if (!this.quiet) this.notice(line);
  }

  /** A line reported even when quiet (the result is lost, or is not what was asked). */
  notice(line: string): void {
    this.active?.clear();
    this.events.onInfo?.(line);
  }

  warn(message: string): void {
    this.active?.clear();
    this.events.onWarning?.(message);
  }

  /** A progress display, or null when quiet or when the caller shows none. Call its done() at the end. */
  progress(label: string, unit: string): ProgressSink | null {
    const sink = this.quiet ? undefined : this.events.progress?.(label, unit);
    if (!sink) return null;
    this.active = sink;
    return {
      update: (done, total, extra) => sink.update(done, total, extra),
      clear: () => sink.clear(),
      done: (extra) => {
        if (this.active === sink) this.active = null;
        sink.done(extra);
      },
    };
  }
}
