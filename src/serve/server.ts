// The prediction server: HTTP/JSON on Node's own `http` (no framework: three routes, and the limits that
// matter here, body size, queue and shutdown, are easier to state exactly without one). Predictions run
// on a pool of worker threads that share the model's SharedArrayBuffers; concurrent requests are batched
// into the native predict calls by src/serve/batcher.ts. API and limits: docs/serving.md.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';
import { defaultCandidates, Network } from '../network/network.js';
import { createExecutor, type Executor } from '../network/executor.js';
import { MicroBatcher, type BatcherStats, type PointPrediction } from './batcher.js';
import { parsePredictRequest, RequestError, type RequestLimits, type TextFeaturizer } from './request.js';

/** Options of `serve`. */
export interface ServeOptions {
  /** TCP port; 0 picks a free one (see `PredictionServer.port`). Default 8080. */
  port?: number;
  /** Address to listen on. Default '127.0.0.1' (this machine only); '0.0.0.0' or '::' for every interface. */
  host?: string;
  /** Worker threads running the predictions; 0 runs them in the server's own thread. Default: the machine's cores. */
  workers?: number;
  /** Labels returned per point when a request gives no `k`. Default 5 (at most the model's labels). */
  k?: number;
  /** Largest `k` a request may ask for. Default 100. */
  maxK?: number;
  /**
   * Mode of requests that give none: 'exact' or 'sampled' (see PredictOptions.mode; on a model whose output
   * layer is dense, 'sampled' scores every output, as 'exact' does, without a warning per request). Default 'exact'.
   */
  mode?: 'exact' | 'sampled';
  /** 'sampled' mode: output neurons scored per point (PredictOptions.candidates). Default: 0.5% of the labels, at least 256. */
  candidates?: number;
  /** Points per native predict call: waiting requests are batched up to this many. Default 128. */
  maxBatch?: number;
  /** Points waiting for a worker; a request that would exceed it is answered 429. Default 4096. */
  maxQueue?: number;
  /** Largest request body in bytes (413 above). Default 1 MiB. */
  maxBodyBytes?: number;
  /** Most instances in one `{"instances": [...]}` request (413 above; at most maxQueue). Default 1024. */
  maxInstances?: number;
  /** A request must arrive completely within this many milliseconds (408 after). Default 30000. */
  requestTimeoutMs?: number;
  /**
   * `close()` answers the requests already received, then waits at most this long for their responses to
   * be sent before it drops the remaining connections. Default 30000.
   */
  stopTimeoutMs?: number;
  /** Receives one line per unexpected server-side failure (500). Default: stderr. */
  onError?: (message: string) => void;
}

/** What `GET /model` answers. */
export interface ModelInfo {
  /** The model file, when the server loaded one. */
  file?: string;
  /** Feature ids accepted: 0 .. inputDim - 1. */
  inputDim: number;
  /** Number of labels (output neurons). */
  labels: number;
  layers: { size: number; activation: string; sampled: boolean }[];
  /** Whether `{"text": ...}` is accepted (the model has a text vectorizer). */
  text: boolean;
  /** Whether answers carry label names. */
  labelNames: boolean;
  defaults: { k: number; mode: 'exact' | 'sampled'; candidates: number };
  limits: { maxK: number; maxBatch: number; maxQueue: number; maxBodyBytes: number; maxInstances: number };
  workers: number;
}

// The text side of a model (set by training on text, stored in the model file).
function textOf(net: Network): { vectorizer: TextFeaturizer | undefined; names: readonly string[] | undefined } {
  return { vectorizer: net.textVectorizer, names: net.labelNames };
}

const positiveInt = (name: string, v: number | undefined, dflt: number, min = 1): number => {
  if (v === undefined) return dflt;
  if (!Number.isInteger(v) || v < min) throw new Error(`Expected ${min === 0 ? 'non-negative' : 'positive'} integer for ${name} but received ${JSON.stringify(v)}`);
  return v;
};

/** Calls PredictionServer's private constructor (set by its static block). */
let construct: (http: Server, exec: Executor, batcher: MicroBatcher, stopTimeoutMs: number) => PredictionServer;

/**
 * A running prediction server (see `serve`).
 *
 * @example
 * ```ts
 * import { serve } from 'sublinear';
 * const server = await serve('model.sl', { port: 8080, mode: 'sampled' });
 * // POST http://127.0.0.1:8080/predict {"features": {"12": 0.5, "907": 1}, "k": 3}
 * process.on('SIGTERM', () => void server.close());
 * ```
 */
export class PredictionServer {
  /** The port it listens on (the one picked when `port` was 0). */
  readonly port: number;
  /** `http://host:port` */
  readonly url: string;
  private stopping: Promise<void> | undefined;
  private active = 0;
  private drained: (() => void) | undefined;

  /**
   * Private, so that the published typings show no parameter types (they would need @types/node's Server);
   * `serve` constructs through `construct`, which the static block below sets.
   */
  private constructor(
    private readonly http: Server,
    private readonly exec: Executor,
    private readonly batcher: MicroBatcher,
    private readonly stopTimeoutMs: number,
  ) {
    const a = http.address() as AddressInfo;
    this.port = a.port;
    this.url = `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
  }

  static {
    construct = (http, exec, batcher, stopTimeoutMs) => new PredictionServer(http, exec, batcher, stopTimeoutMs);
  }

  /** Requests being handled, and the batcher's counters. */
  stats(): BatcherStats & { requests: number } {
    return { ...this.batcher.stats(), requests: this.active };
  }

  /** @internal called by the request handler */
  enter(): void {
    this.active++;
  }
  /** @internal */
  leave(): void {
    if (--this.active === 0 && this.drained) this.drained();
  }
  get isStopping(): boolean {
    return this.stopping !== undefined;
  }

  /**
   * Stops: no new connections; requests already received are answered (new ones on open connections get
   * 503), then connections are closed and the worker threads end. Idempotent.
   */
  close(): Promise<void> {
    this.stopping ??= (async () => {
      const closed = new Promise<void>((r) => this.http.close(() => r()));
      this.http.closeIdleConnections();
      const allAnswered = this.active === 0 ? Promise.resolve() : new Promise<void>((r) => (this.drained = r));
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((r) => (timer = setTimeout(r, this.stopTimeoutMs)));
      await Promise.race([allAnswered.then(() => this.batcher.idle()), late]);
      clearTimeout(timer);
      this.http.closeAllConnections();
      await closed;
      await this.exec.close();
    })();
    return this.stopping;
  }
}

/**
 * Starts an HTTP/JSON prediction server for a model (a `Network` or a model file) and resolves once it
 * listens. Routes: `POST /predict` (`{"features": {"id": value, ...}}`, `{"text": "..."}` for a model
 * trained on text, or `{"instances": [...]}` of either; optional `k` and `mode`), `GET /health`,
 * `GET /model` (ModelInfo). Errors are `{"error": message}` with a 4xx status. See docs/serving.md.
 *
 * @example
 * ```ts
 * import { serve } from 'sublinear';
 * const server = await serve('model.sl', { port: 8080, workers: 2 });
 * // curl -s localhost:8080/predict -d '{"features": {"12": 0.5}, "k": 3}'
 * await server.close();
 * ```
 */
export async function serve(model: Network | string, opts: ServeOptions = {}): Promise<PredictionServer> {
  const port = positiveInt('port', opts.port, 8080, 0);
  if (port > 65535) throw new Error(`Expected a port from 0 to 65535 but received ${port}`);
  const workers = positiveInt('workers', opts.workers, availableParallelism(), 0);
  const maxK = positiveInt('maxK', opts.maxK, 100);
  const k = positiveInt('k', opts.k, 5);
  const maxBatch = positiveInt('maxBatch', opts.maxBatch, 128);
  const maxQueue = positiveInt('maxQueue', opts.maxQueue, 4096);
  const maxBodyBytes = positiveInt('maxBodyBytes', opts.maxBodyBytes, 1 << 20);
  const maxInstances = positiveInt('maxInstances', opts.maxInstances, Math.min(1024, maxQueue));
  if (maxInstances > maxQueue) throw new Error(`Expected maxInstances (${maxInstances}) to be at most maxQueue (${maxQueue})`);
  const requestTimeoutMs = positiveInt('requestTimeoutMs', opts.requestTimeoutMs, 30_000);
  const stopTimeoutMs = positiveInt('stopTimeoutMs', opts.stopTimeoutMs, 30_000, 0);
  const mode = opts.mode ?? 'exact';
  if (mode !== 'exact' && mode !== 'sampled') throw new Error(`Expected 'exact' or 'sampled' for mode but received ${JSON.stringify(opts.mode)}`);
  if (k > maxK) throw new Error(`Expected k (${k}) to be at most maxK (${maxK})`);
  const onError = opts.onError ?? ((m: string) => void process.stderr.write(`sublinear serve: ${m}\n`));

  const file = typeof model === 'string' ? model : undefined;
  const net = typeof model === 'string' ? await Network.load(model) : model;
  const outputs = net.config.layers.at(-1)!.size;
  const candidates = positiveInt('candidates', opts.candidates, defaultCandidates(outputs));
  const { vectorizer, names } = textOf(net);
  if (vectorizer && vectorizer.features > net.config.inputDim) {
    throw new Error(`The model's text vectorizer makes ${vectorizer.features} features but its inputDim is ${net.config.inputDim}`);
  }
  const limits: RequestLimits = {
    features: net.config.inputDim, labels: outputs, maxK, maxInstances, defaultK: Math.min(k, outputs), defaultMode: mode, text: vectorizer,
  };
  const info: ModelInfo = {
    ...(file !== undefined ? { file } : {}),
    inputDim: net.config.inputDim,
    labels: outputs,
    layers: net.config.layers.map((l) => ({ size: l.size, activation: l.activation, sampled: l.sampling !== undefined })),
    text: vectorizer !== undefined,
    labelNames: names !== undefined,
    defaults: { k: limits.defaultK, mode, candidates },
    limits: { maxK, maxBatch, maxQueue, maxBodyBytes, maxInstances },
    workers,
  };

  const exec = createExecutor(workers);
  let server: PredictionServer | undefined;
  try {
    // No warning per request (mode 'sampled' on a dense output layer scores every output: ServeOptions.mode).
    const batcher = new MicroBatcher(net.config.inputDim, (data, kk, m) => net.predict(data, { k: kk, mode: m, candidates, chunk: maxBatch, executor: exec, onWarning: () => {} }), {
      maxBatch, maxQueue, concurrency: Math.max(1, workers),
    });
    // Warm-up: the first sampled prediction builds the hash tables and the cluster index; do it now, once,
    // rather than in (and concurrently across) the first requests.
    const one = { points: 1, features: net.config.inputDim, labels: 0, offsets: new Uint32Array(2), indices: new Uint32Array(0), values: new Float32Array(0), labelOffsets: new Uint32Array(2), labelIndices: new Uint32Array(0) };
    await net.predict(one, { k: 1, mode: 'sampled', candidates, executor: exec, onWarning: () => {} });
    await net.predict(one, { k: 1, mode: 'exact', executor: exec });

    const http = createServer({ requestTimeout: requestTimeoutMs, headersTimeout: Math.min(requestTimeoutMs, 10_000), keepAliveTimeout: 5_000 });
    http.on('request', (req: IncomingMessage, res: ServerResponse) => {
      void handle(req, res).catch((e) => {
        onError(`internal error: ${(e as Error)?.stack ?? String(e)}`);
        if (!res.headersSent) send(res, 500, { error: 'internal server error' });
        else res.destroy();
      });
    });
    // A malformed request line or headers: Node answers 400 and closes; never an exception here.
    http.on('clientError', (err: NodeJS.ErrnoException, socket) => {
      if (socket.writable && err.code !== 'ECONNRESET') {
        const status = err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? '408 Request Timeout' : '400 Bad Request';
        socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      } else {
        socket.destroy();
      }
    });
    await new Promise<void>((resolve, reject) => {
      http.once('error', reject);
      http.listen(port, opts.host ?? '127.0.0.1', () => {
        http.off('error', reject);
        resolve();
      });
    });
    server = construct(http, exec, batcher, stopTimeoutMs);
    const srv = server;

    async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
      srv.enter();
      try {
        if (srv.isStopping) res.setHeader('Connection', 'close');
        const path = (req.url ?? '/').split('?')[0];
        if (path === '/health') {
          if (req.method !== 'GET' && req.method !== 'HEAD') return methodNotAllowed(res, 'GET, HEAD');
          return send(res, srv.isStopping ? 503 : 200, { status: srv.isStopping ? 'stopping' : 'ok', ...srv.stats() });
        }
        if (path === '/model') {
          if (req.method !== 'GET' && req.method !== 'HEAD') return methodNotAllowed(res, 'GET, HEAD');
          return send(res, 200, info);
        }
        if (path !== '/predict') return send(res, 404, { error: `no route ${JSON.stringify(path.slice(0, 100))}: the routes are POST /predict, GET /health and GET /model` });
        if (req.method !== 'POST') return methodNotAllowed(res, 'POST');
        const body = await readBody(req, maxBodyBytes);
        if (srv.isStopping) return send(res, 503, { error: 'the server is stopping' });
        const parsed = parsePredictRequest(body, limits);
        const preds = await batcher.submit(parsed);
        const out = (p: PointPrediction) => (names ? { ...p, names: p.labels.map((l) => names[l] ?? null) } : p);
        return send(res, 200, parsed.batch ? { predictions: preds.map(out) } : out(preds[0]!));
      } catch (e) {
        if (e instanceof RequestError) {
          if (e.status === 413 || e.status === 408) res.setHeader('Connection', 'close');
          if (e.status === 429) res.setHeader('Retry-After', '1');
          return send(res, e.status, { error: e.message });
        }
        throw e;
      } finally {
        srv.leave();
      }
    }
  } catch (e) {
    if (!server) await exec.close();
    throw e;
  }
  return server;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.writableEnded || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function methodNotAllowed(res: ServerResponse, allow: string): void {
  res.setHeader('Allow', allow);
  send(res, 405, { error: `method not allowed: use ${allow.replace(', ', ' or ')}` });
}

/** The body as UTF-8 text, at most `max` bytes (RequestError 413 above; 400 when invalid UTF-8 or cut off). */
function readBody(req: IncomingMessage, max: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (declared > max) {
      req.resume(); // discard what the client sends; the response closes the connection
      reject(new RequestError(413, `request body too large: ${declared} bytes (this server accepts at most ${max})`));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on('data', (c: Buffer) => {
      if (failed) return;
      size += c.length;
      if (size > max) {
        failed = true;
        chunks.length = 0;
        reject(new RequestError(413, `request body too large: more than ${max} bytes (this server accepts at most ${max})`));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      if (failed) return;
      try {
        resolve(new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks, size)));
      } catch {
        reject(new RequestError(400, 'the request body is not valid UTF-8'));
      }
    });
    req.on('error', (e) => {
      if (!failed) reject(new RequestError(400, `the request body could not be read: ${e.message}`));
      failed = true;
    });
    req.on('close', () => {
      if (!failed && !req.complete) reject(new RequestError(400, 'the request was aborted by the client'));
      failed = true;
    });
  });
}
