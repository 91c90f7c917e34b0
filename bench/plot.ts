// Dependency-free SVG charts for the benchmark reports: line charts of accuracy against wall-clock time
// (plotCurves) and horizontal bar charts of throughput (plotBars). Output is a standalone SVG string
// (write it to a .svg file; browsers, GitHub and rsvg-convert render it).

/** One line of a curve chart. Points with a non-finite coordinate (or x <= 0 on a log axis) are dropped. */
export interface Series {
  name: string;
  points: [number, number][];
  /** CSS colour; default: the next colour of a colour-blind-safe palette. */
  color?: string;
  /** Draw dashed (default: solid for the first 8 series, then dashed). */
  dashed?: boolean;
}

export interface CurvePlotOptions {
  title: string;
  /** e.g. 'wall-clock training time (s)'. */
  xLabel: string;
  /** e.g. 'P@1'. */
  yLabel: string;
  series: Series[];
  logX?: boolean;
  logY?: boolean;
  /** Smaller text under the title (dataset, machine, settings). */
  subtitle?: string;
  width?: number;
  height?: number;
  /** Axis ranges; default: the data range (y from 0 when all y >= 0 on a linear axis). */
  xMin?: number;
  xMax?: number;
  yMin?: number;
  yMax?: number;
  /** Dot markers on the points (default: when a series has at most 80 points). */
  markers?: boolean;
}

export interface Bar {
  name: string;
  /** Non-finite or null: no bar, `note` is shown instead (e.g. 'not installed'). */
  value: number | null;
  /** Text after the value (or instead of a missing bar). */
  note?: string;
  color?: string;
}

export interface BarPlotOptions {
  title: string;
  /** Label of the value axis, with its unit, e.g. 'training throughput (samples/s)'. */
  valueLabel: string;
  bars: Bar[];
  logScale?: boolean;
  subtitle?: string;
  width?: number;
  /** Formats a value for the bar labels (default: 3 significant digits with thousands separators). */
  format?: (v: number) => string;
}

/** Okabe-Ito colours (distinguishable with colour-blindness), then a few more. */
export const PALETTE = ['#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#000000', '#8C564B', '#7F7F7F', '#BCBD22'];

const FONT = 'font-family="Helvetica, Arial, sans-serif"';

export function escapeXml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&apos;');
}

/** Rough text width in px for Helvetica-like fonts (for layout only). */
function textWidth(s: string, size: number): number {
  let w = 0;
  for (const ch of s) w += /[ilj.,:;'|!]/.test(ch) ? 0.3 : /[mwMW@]/.test(ch) ? 0.9 : /[A-Z0-9]/.test(ch) ? 0.65 : 0.55;
  return w * size;
}

/** Tick label: up to 3 significant digits; k / M suffixes for large magnitudes. */
export function formatTick(v: number): string {
  if (v === 0) return '0';
  const a = Math.abs(v);
  const trim = (x: number) => String(Number(x.toPrecision(3)));
  if (a >= 1e9) return trim(v / 1e9) + 'G';
  if (a >= 1e6) return trim(v / 1e6) + 'M';
  if (a >= 1e3) return trim(v / 1e3) + 'k';
  if (a < 1e-3) return v.toExponential(0);
  return trim(v);
}

/** "Nice" linear ticks (1, 2, 2.5, 5 x 10^k steps) covering [lo, hi]. */
export function linearTicks(lo: number, hi: number, target = 6): number[] {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / target;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const out: number[] = [];
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : Number(v.toPrecision(12)));
  return out;
}

/** Log ticks: decades, plus 2 and 5 when the range spans few decades. */
export function logTicks(lo: number, hi: number): { major: number[]; minor: number[] } {
  const d0 = Math.floor(Math.log10(lo)), d1 = Math.ceil(Math.log10(hi));
  const major: number[] = [], minor: number[] = [];
  const mids = d1 - d0 <= 3 ? [2, 5] : [];
  for (let d = d0; d <= d1; d++) {
    const base = 10 ** d;
    if (base >= lo * (1 - 1e-9) && base <= hi * (1 + 1e-9)) major.push(Number(base.toPrecision(12)));
    for (let m = 2; m <= 9; m++) {
      const v = Number((m * base).toPrecision(12));
      if (v < lo * (1 - 1e-9) || v > hi * (1 + 1e-9)) continue;
      if (mids.includes(m)) major.push(v);
      else minor.push(v);
    }
  }
  if (major.length < 2) {
    // a narrow range inside one decade: fall back to linear ticks on the log axis
    return { major: linearTicks(lo, hi, 4).filter((v) => v > 0), minor: [] };
  }
  return { major, minor };
}

interface Axis {
  lo: number;
  hi: number;
  log: boolean;
}
function project(a: Axis, v: number, p0: number, p1: number): number {
  const t = a.log ? (Math.log10(v) - Math.log10(a.lo)) / (Math.log10(a.hi) - Math.log10(a.lo)) : (v - a.lo) / (a.hi - a.lo);
  return p0 + t * (p1 - p0);
}

function axisRange(values: number[], log: boolean, min?: number, max?: number, zeroBase = false): Axis {
  let lo = min ?? Math.min(...values), hi = max ?? Math.max(...values);
  if (!values.length) { lo = min ?? (log ? 1 : 0); hi = max ?? (log ? 10 : 1); }
  if (log) {
    if (!(lo > 0)) lo = Math.min(...values.filter((v) => v > 0), hi > 0 ? hi / 10 : 1);
    if (hi <= lo) { lo /= 2; hi = lo * 4; }
    if (min === undefined) lo = 10 ** (Math.floor(Math.log10(lo) * 4) / 4);
    if (max === undefined) hi = 10 ** (Math.ceil(Math.log10(hi) * 4) / 4);
    return { lo, hi, log };
  }
  if (zeroBase && min === undefined && lo > 0) lo = 0;
  if (hi <= lo) { hi = lo + (lo === 0 ? 1 : Math.abs(lo) * 0.1); }
  if (max === undefined || min === undefined) {
    const t = linearTicks(lo, hi);
    const step = t.length > 1 ? t[1]! - t[0]! : 1;
    if (min === undefined) lo = Math.floor(lo / step + 1e-9) * step;
    if (max === undefined) hi = Math.ceil(hi / step - 1e-9) * step;
  }
  return { lo, hi, log };
}

function header(width: number, height: number, title: string, subtitle?: string): string[] {
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ${FONT}>`,
    `<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${width / 2}" y="26" font-size="17" font-weight="bold" text-anchor="middle" fill="#111">${escapeXml(title)}</text>`,
  ];
  if (subtitle) out.push(`<text x="${width / 2}" y="46" font-size="12" text-anchor="middle" fill="#555">${escapeXml(subtitle)}</text>`);
  return out;
}

/** Line chart (e.g. P@1 against training time) as an SVG string. */
export function plotCurves(o: CurvePlotOptions): string {
  const width = o.width ?? 860, height = o.height ?? 520;
  const logX = !!o.logX, logY = !!o.logY;
  const series = o.series.map((s, i) => ({
    name: s.name,
    color: s.color ?? PALETTE[i % PALETTE.length]!,
    dashed: s.dashed ?? i >= PALETTE.length,
    pts: s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (!logX || x > 0) && (!logY || y > 0)),
  }));
  const xs = series.flatMap((s) => s.pts.map((p) => p[0])), ys = series.flatMap((s) => s.pts.map((p) => p[1]));
  const X = axisRange(xs, logX, o.xMin, o.xMax, true);
  const Y = axisRange(ys, logY, o.yMin, o.yMax, ys.every((v) => v >= 0));

  const legendW = Math.min(260, Math.max(90, ...series.map((s) => textWidth(s.name, 12) + 40)));
  const top = o.subtitle ? 64 : 50, left = 78, right = width - legendW - 24, bottom = height - 58;
  const out = header(width, height, o.title, o.subtitle);

  // grid, ticks and tick labels
  const xt = X.log ? logTicks(X.lo, X.hi) : { major: linearTicks(X.lo, X.hi, 8), minor: [] as number[] };
  const yt = Y.log ? logTicks(Y.lo, Y.hi) : { major: linearTicks(Y.lo, Y.hi, 6), minor: [] as number[] };
  for (const v of xt.minor) {
    const px = project(X, v, left, right).toFixed(1);
    out.push(`<line x1="${px}" y1="${top}" x2="${px}" y2="${bottom}" stroke="#f0f0f0"/>`);
  }
  for (const v of yt.minor) {
    const py = project(Y, v, bottom, top).toFixed(1);
    out.push(`<line x1="${left}" y1="${py}" x2="${right}" y2="${py}" stroke="#f0f0f0"/>`);
  }
  for (const v of xt.major) {
    const px = project(X, v, left, right).toFixed(1);
    out.push(`<line x1="${px}" y1="${top}" x2="${px}" y2="${bottom}" stroke="#e3e3e3"/>`);
    out.push(`<line x1="${px}" y1="${bottom}" x2="${px}" y2="${bottom + 5}" stroke="#333"/>`);
    out.push(`<text x="${px}" y="${bottom + 19}" font-size="12" text-anchor="middle" fill="#333">${escapeXml(formatTick(v))}</text>`);
  }
  for (const v of yt.major) {
    const py = project(Y, v, bottom, top).toFixed(1);
    out.push(`<line x1="${left}" y1="${py}" x2="${right}" y2="${py}" stroke="#e3e3e3"/>`);
    out.push(`<line x1="${left - 5}" y1="${py}" x2="${left}" y2="${py}" stroke="#333"/>`);
    out.push(`<text x="${left - 8}" y="${Number(py) + 4}" font-size="12" text-anchor="end" fill="#333">${escapeXml(formatTick(v))}</text>`);
  }
  out.push(`<rect x="${left}" y="${top}" width="${right - left}" height="${bottom - top}" fill="none" stroke="#333"/>`);
  // axis labels
  out.push(`<text x="${(left + right) / 2}" y="${height - 18}" font-size="14" text-anchor="middle" fill="#111">${escapeXml(o.xLabel + (logX ? ' [log scale]' : ''))}</text>`);
  const cy = (top + bottom) / 2;
  out.push(`<text x="22" y="${cy}" font-size="14" text-anchor="middle" fill="#111" transform="rotate(-90 22 ${cy})">${escapeXml(o.yLabel + (logY ? ' [log scale]' : ''))}</text>`);

  // series (clipped to the plot area)
  out.push(`<defs><clipPath id="plot-area"><rect x="${left}" y="${top}" width="${right - left}" height="${bottom - top}"/></clipPath></defs>`);
  out.push(`<g clip-path="url(#plot-area)">`);
  for (const s of series) {
    if (!s.pts.length) continue;
    const pts = s.pts.map(([x, y]) => `${project(X, x, left, right).toFixed(1)},${project(Y, y, bottom, top).toFixed(1)}`);
    const dash = s.dashed ? ' stroke-dasharray="7 4"' : '';
    out.push(`<polyline data-series="${escapeXml(s.name)}" points="${pts.join(' ')}" fill="none" stroke="${s.color}" stroke-width="2.2" stroke-linejoin="round"${dash}/>`);
    if (o.markers ?? s.pts.length <= 80) {
      for (const p of pts) {
        const [px, py] = p.split(',');
        out.push(`<circle cx="${px}" cy="${py}" r="3" fill="${s.color}"/>`);
      }
    }
  }
  out.push('</g>');
  if (!xs.length) out.push(`<text x="${(left + right) / 2}" y="${cy}" font-size="14" text-anchor="middle" fill="#999">no data</text>`);

  // legend (right of the plot area)
  const lx = right + 16;
  out.push(`<g data-legend="1">`);
  series.forEach((s, i) => {
    const ly = top + 8 + i * 22;
    const dash = s.dashed ? ' stroke-dasharray="7 4"' : '';
    out.push(`<line x1="${lx}" y1="${ly}" x2="${lx + 26}" y2="${ly}" stroke="${s.color}" stroke-width="2.5"${dash}/>`);
    out.push(`<circle cx="${lx + 13}" cy="${ly}" r="3" fill="${s.color}"/>`);
    const label = s.pts.length ? s.name : `${s.name} (no data)`;
    out.push(`<text x="${lx + 32}" y="${ly + 4}" font-size="12" fill="#111">${escapeXml(label)}</text>`);
  });
  out.push('</g>');
  out.push('</svg>');
  return out.join('\n') + '\n';
}

function defaultFormat(v: number): string {
  if (Math.abs(v) >= 1000) return Math.round(v).toLocaleString('en-US');
  return String(Number(v.toPrecision(3)));
}

/** Horizontal bar chart (e.g. training throughput per system) as an SVG string. */
export function plotBars(o: BarPlotOptions): string {
  const width = o.width ?? 860;
  const fmt = o.format ?? defaultFormat;
  const log = !!o.logScale;
  const rowH = 34;
  const top = o.subtitle ? 70 : 56;
  const nameW = Math.min(320, Math.max(80, ...o.bars.map((b) => textWidth(b.name, 13) + 16)));
  const left = nameW + 12, right = width - 150;
  const bottom = top + Math.max(1, o.bars.length) * rowH + 6;
  const height = bottom + 58;
  const vals = o.bars.map((b) => b.value).filter((v): v is number => v !== null && Number.isFinite(v) && (!log || v > 0));
  // log scale: start at the decade below the smallest bar so that every bar has a visible length
  const logLo = vals.length ? 10 ** Math.floor(Math.log10(Math.min(...vals)) - 1e-9) : 1;
  const A = axisRange(vals, log, log ? logLo : 0, undefined, true);
  const out = header(width, height, o.title, o.subtitle);
  const ticks = log ? logTicks(A.lo, A.hi) : { major: linearTicks(A.lo, A.hi, 6), minor: [] as number[] };
  for (const v of ticks.minor) {
    const px = project(A, v, left, right).toFixed(1);
    out.push(`<line x1="${px}" y1="${top}" x2="${px}" y2="${bottom}" stroke="#f0f0f0"/>`);
  }
  for (const v of ticks.major) {
    const px = project(A, v, left, right).toFixed(1);
    out.push(`<line x1="${px}" y1="${top}" x2="${px}" y2="${bottom}" stroke="#e3e3e3"/>`);
    out.push(`<line x1="${px}" y1="${bottom}" x2="${px}" y2="${bottom + 5}" stroke="#333"/>`);
    out.push(`<text x="${px}" y="${bottom + 19}" font-size="12" text-anchor="middle" fill="#333">${escapeXml(formatTick(v))}</text>`);
  }
  o.bars.forEach((b, i) => {
    const y = top + 6 + i * rowH, h = rowH - 10, mid = y + h / 2 + 4;
    out.push(`<text x="${left - 8}" y="${mid}" font-size="13" text-anchor="end" fill="#111">${escapeXml(b.name)}</text>`);
    const ok = b.value !== null && Number.isFinite(b.value) && (!log || b.value > 0);
    if (!ok) {
      out.push(`<text x="${left + 8}" y="${mid}" font-size="12" font-style="italic" fill="#888">${escapeXml(b.note ?? 'no result')}</text>`);
      return;
    }
    const v = b.value as number;
    const x1 = project(A, Math.min(Math.max(v, A.lo), A.hi), left, right);
    const color = b.color ?? PALETTE[i % PALETTE.length]!;
    out.push(`<rect data-bar="${escapeXml(b.name)}" x="${left}" y="${y}" width="${Math.max(1, x1 - left).toFixed(1)}" height="${h}" fill="${color}"/>`);
    const label = fmt(v) + (b.note ? `  ${b.note}` : '');
    out.push(`<text x="${(x1 + 6).toFixed(1)}" y="${mid}" font-size="12" fill="#111">${escapeXml(label)}</text>`);
  });
  out.push(`<line x1="${left}" y1="${top}" x2="${left}" y2="${bottom}" stroke="#333"/>`);
  out.push(`<line x1="${left}" y1="${bottom}" x2="${right}" y2="${bottom}" stroke="#333"/>`);
  out.push(`<text x="${(left + right) / 2}" y="${height - 18}" font-size="14" text-anchor="middle" fill="#111">${escapeXml(o.valueLabel + (log ? ' [log scale]' : ''))}</text>`);
  out.push('</svg>');
  return out.join('\n') + '\n';
}
