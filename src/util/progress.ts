// Progress of long operations (reading data, generating data, training, prediction) on stderr.
// On a terminal: one line redrawn in place. Elsewhere (a log file, nohup, CI, a pipe): a plain line every
// few seconds (`lineIntervalMs`), with no carriage returns or escape codes, so that a log shows a long
// run is alive and how far it got; operations shorter than that interval print nothing.
//
//   reading training data [=========>          ]  48%  512.0/1069.3 MB  181.2 MB/s  ETA 3s
//   training [====>    ] 12%  1200/10000 batches  9.5 batches/s  ETA 15m  epoch 1/5 loss 3.2101

/** Options of `Progress`. */
export interface ProgressOptions {
  /** Text before the bar, e.g. 'reading train.txt'. Default ''. */
  label?: string;
  /** Name of the unit of `done`/`total`, shown after the amounts and in the rate ('MB', 'points',
   *  'batches'). Default 'items'. */
  unit?: string;
  /** Stream to draw on. Default process.stderr. */
  stream?: NodeJS.WriteStream;
  /**
   * 'bar': redraw one line in place; 'lines': print a plain line every `lineIntervalMs`; 'off': nothing.
   * Default: 'bar' when `stream` is a TTY, else 'lines'.
   */
  style?: 'bar' | 'lines' | 'off';
  /** Minimum milliseconds between redraws of the bar (the last update is always drawn by done()). Default 100. */
  intervalMs?: number;
  /** 'lines' style: milliseconds between lines (the first one after this long too). Default 5000. */
  lineIntervalMs?: number;
}

export class Progress {
  /** True when drawing a bar in place (a terminal). */
  readonly enabled: boolean;
  readonly style: 'bar' | 'lines' | 'off';
  private readonly lineIntervalMs: number;
  private linesPrinted = 0;
  private readonly label: string;
  private readonly unit: string;
  private readonly stream: NodeJS.WriteStream;
  private readonly intervalMs: number;
  private readonly start = performance.now();
  private lastDraw = -Infinity;
  private drawn = false;
  private finished = false;
  private done_ = 0;
  private total: number | undefined;
  private extra = '';

  constructor(opts: ProgressOptions = {}) {
    this.label = opts.label ?? '';
    this.unit = opts.unit ?? 'items';
    this.stream = opts.stream ?? process.stderr;
    this.style = opts.style ?? (this.stream.isTTY === true ? 'bar' : 'lines');
    this.enabled = this.style === 'bar';
    this.intervalMs = opts.intervalMs ?? 100;
    this.lineIntervalMs = opts.lineIntervalMs ?? 5000;
    this.lastDraw = this.style === 'lines' ? this.start : -Infinity;
  }

  /**
   * Reports `done` units out of `total` (omit or pass 0 when unknown: no bar, no ETA) and an optional
   * free-form suffix such as `loss 0.4213`. Cheap when called often: redraws are throttled.
   */
  update(done: number, total?: number, extra?: string): void {
    this.done_ = done;
    this.total = total;
    if (extra !== undefined) this.extra = extra;
    if (this.style === 'off' || this.finished) return;
    const now = performance.now();
    if (now - this.lastDraw < (this.enabled ? this.intervalMs : this.lineIntervalMs)) return;
    this.lastDraw = now;
    if (this.enabled) this.draw(now);
    else this.printLine(now);
  }

  /** Prints a message on its own line, clearing the bar first (it is redrawn by the next update). */
  log(text: string): void {
    this.clear();
    this.stream.write(text.endsWith('\n') ? text : `${text}\n`);
  }

  /** Erases the line (e.g. before printing a message), the next update redraws it. */
  clear(): void {
    if (this.enabled && this.drawn) {
      this.stream.write('\r\x1b[2K');
      this.drawn = false;
    }
  }

  /** Draws the final state and ends the line. Idempotent. */
  done(extra?: string): void {
    if (this.finished) return;
    if (extra !== undefined) this.extra = extra;
    if (this.enabled && (this.drawn || this.done_ > 0)) {
      this.draw(performance.now());
      this.stream.write('\n');
    } else if (this.style === 'lines' && this.linesPrinted > 0) {
      this.printLine(performance.now()); // the final state of an operation that was reported along the way
    }
    this.finished = true;
  }

  /** The current line as it would be drawn (without the carriage return). */
  render(now = performance.now()): string {
    const seconds = Math.max(1e-9, (now - this.start) / 1000);
    const rate = this.done_ / seconds;
    const parts: string[] = [];
    if (this.label) parts.push(this.label);
    const total = this.total && this.total > 0 ? this.total : undefined;
    if (total !== undefined) {
      const frac = Math.min(1, Math.max(0, this.done_ / total));
      const width = 20;
      const full = Math.floor(frac * width);
      const bar = '='.repeat(full) + (full < width ? '>' : '') + ' '.repeat(Math.max(0, width - full - 1));
      parts.push(`[${bar}] ${String(Math.floor(frac * 100)).padStart(3)}%`);
      parts.push(`${formatAmount(this.done_)}/${formatAmount(total)} ${this.unit}`);
    } else {
      parts.push(`${formatAmount(this.done_)} ${this.unit}`);
    }
    parts.push(`${formatAmount(rate)} ${this.unit}/s`);
    if (total !== undefined && rate > 0 && this.done_ < total) parts.push(`ETA ${formatDuration((total - this.done_) / rate)}`);
    if (this.extra) parts.push(this.extra);
    return parts.join('  ');
  }

  private printLine(now: number): void {
    this.stream.write(`${this.render(now)}\n`);
    this.linesPrinted++;
  }

  private draw(now: number): void {
    let line = this.render(now);
    const cols = this.stream.columns;
    if (cols && line.length > cols - 1) line = line.slice(0, cols - 1);
    this.stream.write(`\r\x1b[2K${line}`);
    this.drawn = true;
  }
}

/** 3 significant figures for small amounts, integers with thousands separators for large ones. */
export function formatAmount(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  const a = Math.abs(x);
  if (a >= 1000) return Math.round(x).toLocaleString('en-US');
  if (Number.isInteger(x)) return String(x);
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  return x.toFixed(2);
}

/** 42s, 3m05s, 2h07m. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}
