import { describe, expect, it } from 'vitest';
import { formatAmount, formatDuration, Progress } from '../../src/util/progress.js';

function fakeStream(isTTY: boolean): NodeJS.WriteStream & { text: string } {
  const s = { isTTY, columns: 120, text: '', write: (chunk: string) => ((s.text += chunk), true) };
  return s as unknown as NodeJS.WriteStream & { text: string };
}

describe('Progress', () => {
  it('prints nothing off a terminal for an operation shorter than the line interval', () => {
    const stream = fakeStream(false);
    const p = new Progress({ label: 'reading', unit: 'MB', stream });
    p.update(5, 10);
    p.clear();
    p.done();
    expect([p.enabled, p.style]).toEqual([false, 'lines']);
    expect(stream.text).toBe('');
  });

  it('prints plain lines (no carriage returns or escape codes) off a terminal, then the final state', () => {
    const stream = fakeStream(false);
    const p = new Progress({ label: 'training', unit: 'batches', stream, lineIntervalMs: 0 });
    p.update(25, 100, 'loss 0.4213');
    p.update(50, 100, 'loss 0.3000');
    p.clear();
    p.done();
    const lines = stream.text.split('\n');
    expect(lines.pop()).toBe('');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^training {2}\[=====> {14}\] {2}25% {2}25\/100 batches .*loss 0\.4213$/);
    expect(lines[2]).toMatch(/50\/100 batches .*loss 0\.3000$/);
    expect(stream.text).not.toMatch(/[\r\x1b]/);
  });

  it("style 'off' prints nothing", () => {
    const stream = fakeStream(true);
    const p = new Progress({ stream, style: 'off', intervalMs: 0 });
    p.update(1, 2);
    p.done();
    expect(stream.text).toBe('');
  });

  it('draws label, bar, amounts, rate, ETA and a custom suffix on a terminal, then ends the line', () => {
    const stream = fakeStream(true);
    const p = new Progress({ label: 'training', unit: 'batches', stream, intervalMs: 0 });
    p.update(25, 100, 'loss 0.4213');
    expect(stream.text.startsWith('\r\x1b[2K')).toBe(true);
    expect(stream.text).toMatch(/training {2}\[=====> {14}\] {2}25% {2}25\/100 batches {2}[\d,.]+ batches\/s {2}ETA \d+s {2}loss 0\.4213$/);
    p.done();
    expect(stream.text.endsWith('\n')).toBe(true);
    const after = stream.text.length;
    p.update(50, 100);
    p.done();
    expect(stream.text.length).toBe(after); // nothing after done()
  });

  it('throttles redraws and works without a total', () => {
    const stream = fakeStream(true);
    const p = new Progress({ unit: 'points', stream, intervalMs: 60_000 });
    p.update(1);
    p.update(2);
    p.update(3);
    expect(stream.text.split('\r').length - 1).toBe(1);
    expect(p.render()).toMatch(/^3 points {2}[\d,.]+ points\/s$/);
  });

  it('formats amounts and durations compactly', () => {
    expect([formatAmount(3), formatAmount(2.5), formatAmount(12.34), formatAmount(123.4), formatAmount(1234567)]).toEqual(['3', '2.50', '12.3', '123', '1,234,567']);
    expect([formatDuration(42), formatDuration(185), formatDuration(7620), formatDuration(Infinity)]).toEqual(['42s', '3m05s', '2h07m', '?']);
  });
});
