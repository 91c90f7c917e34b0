// The prediction server's metrics in the Prometheus text exposition format (version 0.0.4): what
// `GET /metrics` answers. A few counters, gauges and histograms kept in plain objects; no client library
// (what is exposed is small and fixed, and the test parses it with a Prometheus text-format parser).

/** Label values of one series, e.g. { route: '/predict', code: '200' }. */
export type Labels = Record<string, string>;

const key = (l: Labels) => JSON.stringify(Object.entries(l).sort(([a], [b]) => (a < b ? -1 : 1)));
/** A label value escaped as the text format wants it (backslash, double quote, line feed). */
const escape = (v: string) => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
const labelText = (l: Labels) => {
  const e = Object.entries(l);
  return e.length ? `{${e.map(([k, v]) => `${k}="${escape(v)}"`).join(',')}}` : '';
};
/** A sample value: integers as they are, other numbers in full precision, and the text format's infinities. */
const num = (v: number) => (v === Infinity ? '+Inf' : v === -Infinity ? '-Inf' : Number.isNaN(v) ? 'NaN' : String(v));

interface Family {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram';
  render(): string[];
}

export class Counter implements Family {
  readonly type = 'counter' as const;
  private readonly values = new Map<string, { labels: Labels; value: number }>();
  constructor(readonly name: string, readonly help: string) {}
  inc(labels: Labels = {}, by = 1): void {
    const k = key(labels);
    const s = this.values.get(k);
    if (s) s.value += by;
    else this.values.set(k, { labels, value: by });
  }
  get(labels: Labels = {}): number {
    return this.values.get(key(labels))?.value ?? 0;
  }
  render(): string[] {
    return [...this.values.values()].map((s) => `${this.name}${labelText(s.labels)} ${num(s.value)}`);
  }
}

/** A gauge (or a counter kept elsewhere: `type` 'counter') read when the metrics are rendered. */
export class Gauge implements Family {
  constructor(
    readonly name: string, readonly help: string, private readonly read: () => number | { labels: Labels; value: number }[],
    readonly type: 'gauge' | 'counter' = 'gauge',
  ) {}
  render(): string[] {
    const v = this.read();
    if (typeof v === 'number') return [`${this.name} ${num(v)}`];
    return v.map((s) => `${this.name}${labelText(s.labels)} ${num(s.value)}`);
  }
}

export class Histogram implements Family {
  readonly type = 'histogram' as const;
  private readonly series = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
  /** `buckets`: the upper bounds, ascending (the +Inf bucket is added). */
  constructor(readonly name: string, readonly help: string, private readonly buckets: readonly number[]) {}
  observe(v: number, labels: Labels = {}): void {
    const k = key(labels);
    let s = this.series.get(k);
    if (!s) this.series.set(k, (s = { labels, counts: this.buckets.map(() => 0), sum: 0, count: 0 }));
    for (let b = 0; b < this.buckets.length; b++) if (v <= this.buckets[b]!) s.counts[b]!++;
    s.sum += v;
    s.count++;
  }
  render(): string[] {
    const lines: string[] = [];
    for (const s of this.series.values()) {
      this.buckets.forEach((le, b) => lines.push(`${this.name}_bucket${labelText({ ...s.labels, le: num(le) })} ${s.counts[b]}`));
      lines.push(`${this.name}_bucket${labelText({ ...s.labels, le: '+Inf' })} ${s.count}`);
      lines.push(`${this.name}_sum${labelText(s.labels)} ${num(s.sum)}`);
      lines.push(`${this.name}_count${labelText(s.labels)} ${s.count}`);
    }
    return lines;
  }
}

/** A set of metric families, rendered in the text format. */
export class Registry {
  private readonly families: Family[] = [];
  add<F extends Family>(f: F): F {
    this.families.push(f);
    return f;
  }
  /** The exposition: # HELP and # TYPE of every family, then its samples. */
  render(): string {
    const out: string[] = [];
    for (const f of this.families) {
      out.push(`# HELP ${f.name} ${f.help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`, `# TYPE ${f.name} ${f.type}`, ...f.render());
    }
    return out.join('\n') + '\n';
  }
}

/** The Content-Type of the text exposition format. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** Latency buckets (seconds): 0.5 ms to 10 s. */
export const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Batch-size buckets (points per native predict call). */
export const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/** The server's metrics (src/serve/server.ts): registered here so that /metrics always lists the same families. */
export class ServerMetrics {
  readonly registry = new Registry();
  readonly requests = this.registry.add(new Counter('sublinear_http_requests_total', 'HTTP requests answered, by route and status code.'));
  readonly latency = this.registry.add(new Histogram('sublinear_http_request_duration_seconds', 'Time from a request\'s arrival to its answer, by route.', LATENCY_BUCKETS));
  readonly batchPoints = this.registry.add(new Histogram('sublinear_batch_points', 'Points per native predict call (micro-batches).', BATCH_BUCKETS));
  readonly predicted = this.registry.add(new Counter('sublinear_predicted_points_total', 'Points predicted.'));
  readonly learned = this.registry.add(new Counter('sublinear_learned_examples_total', 'Examples learned online (POST /learn).'));
  readonly newLabels = this.registry.add(new Counter('sublinear_learned_new_labels_total', 'Labels added by online learning.'));
  readonly reloads = this.registry.add(new Counter('sublinear_model_reloads_total', 'Model reloads (SIGHUP, POST /admin/reload), by result.'));
  readonly snapshots = this.registry.add(new Counter('sublinear_snapshots_total', 'Model snapshots written (POST /snapshot, --snapshot-every), by result.'));

  constructor(read: { queued: () => number; inFlight: () => number; ready: () => boolean; labels: () => number; startSeconds: number }) {
    this.registry.add(new Gauge('sublinear_queue_points', 'Points waiting for a prediction thread.', read.queued));
    this.registry.add(new Gauge('sublinear_batches_in_flight', 'Native predict calls running.', read.inFlight));
    this.registry.add(new Gauge('sublinear_ready', '1 when the model and its threads are ready (GET /v2/health/ready), else 0.', () => (read.ready() ? 1 : 0)));
    this.registry.add(new Gauge('sublinear_model_labels', 'Labels of the model served.', read.labels));
    this.registry.add(new Gauge('process_resident_memory_bytes', 'Resident memory size in bytes.', () => process.memoryUsage.rss()));
    this.registry.add(new Gauge('process_start_time_seconds', 'Start time of the process since the Unix epoch in seconds.', () => read.startSeconds));
    this.registry.add(new Gauge('process_cpu_seconds_total', 'Total user and system CPU time spent in seconds.', () => {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1e6;
    }, 'counter'));
  }
}
