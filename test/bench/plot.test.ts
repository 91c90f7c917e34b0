import { describe, expect, it } from 'vitest';
import { formatTick, linearTicks, logTicks, plotBars, plotCurves } from '../../bench/plot.js';

const count = (s: string, sub: string) => s.split(sub).length - 1;

describe('plotCurves', () => {
  const svg = plotCurves({
    title: 'Delicious <P@1> & time',
    xLabel: 'wall-clock training time (s)',
    yLabel: 'P@1',
    series: [
      { name: 'sublinear', points: [[0, 0.01], [1, 0.3], [2, 0.5], [4, 0.6]] },
      { name: 'tfjs-wasm dense', points: [[0, 0.01], [5, 0.4], [NaN, 0.5], [12, 0.6]] },
      { name: 'pytorch', points: [] },
    ],
  });

  it('is a standalone SVG with escaped title, axis labels and units', () => {
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trim().endsWith('</svg>')).toBe(true);
    expect(svg).toContain('Delicious &lt;P@1&gt; &amp; time');
    expect(svg).toContain('>wall-clock training time (s)</text>');
    expect(svg).toContain('>P@1</text>');
  });

  it('draws one polyline per non-empty series with distinct colours, and a legend entry for each', () => {
    expect(count(svg, '<polyline')).toBe(2);
    const strokes = [...svg.matchAll(/<polyline[^>]*stroke="(#[0-9A-Fa-f]{6})"/g)].map((m) => m[1]);
    expect(new Set(strokes).size).toBe(2);
    expect(svg).toContain('data-series="sublinear"');
    expect(svg).toMatch(/data-series="tfjs-wasm dense" points="([\d.]+,[\d.]+ ){2}[\d.]+,[\d.]+"/); // NaN point dropped
    const legend = svg.slice(svg.indexOf('data-legend'));
    for (const name of ['sublinear', 'tfjs-wasm dense', 'pytorch (no data)']) expect(legend).toContain(`>${name}</text>`);
  });

  it('has tick labels on both axes', () => {
    for (const t of ['0', '2', '4', '6', '8', '10', '12']) expect(svg).toContain(`>${t}</text>`);
    for (const t of ['0.2', '0.4', '0.6']) expect(svg).toContain(`>${t}</text>`);
  });

  it('log x drops x <= 0 and marks the axis', () => {
    const s = plotCurves({ title: 't', xLabel: 'x (s)', yLabel: 'y', logX: true, series: [{ name: 'a', points: [[0, 1], [1, 2], [100, 3]] }] });
    expect(s).toContain('x (s) [log scale]');
    expect(s).toMatch(/data-series="a" points="[\d.]+,[\d.]+ [\d.]+,[\d.]+"/);
    expect(s).toContain('>100</text>');
  });
});

describe('plotBars', () => {
  it('draws a bar per finite value and the note for missing ones', () => {
    const svg = plotBars({
      title: 'Throughput', valueLabel: 'training throughput (samples/s)', logScale: true,
      bars: [{ name: 'sublinear', value: 4200 }, { name: 'pytorch', value: 75 }, { name: 'tfjs-wasm', value: null, note: 'out of memory' }],
    });
    expect(count(svg, '<rect data-bar=')).toBe(2);
    expect(svg).toContain('>out of memory</text>');
    expect(svg).toContain('>4,200</text>');
    expect(svg).toContain('training throughput (samples/s) [log scale]');
    expect(svg).toContain('>1k</text>');
  });
});

describe('tick helpers', () => {
  it('linear ticks are nice steps covering the range', () => {
    expect(linearTicks(0, 1, 5)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(linearTicks(0, 25, 6)).toEqual([0, 5, 10, 15, 20, 25]);
  });
  it('log ticks include decades', () => {
    expect(logTicks(1, 1000).major).toEqual([1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]);
    expect(logTicks(1, 1e6).major).toEqual([1, 10, 100, 1000, 1e4, 1e5, 1e6]);
  });
  it('formats ticks compactly', () => {
    expect([0, 0.25, 5, 1500, 20000, 3e6].map(formatTick)).toEqual(['0', '0.25', '5', '1.5k', '20k', '3M']);
  });
});
