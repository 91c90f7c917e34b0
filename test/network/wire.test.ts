// Tasks reach worker threads by postMessage, which writes a typed array's length modulo 2^32 bytes: a
// view of 4 GiB or more arrives truncated (its SharedArrayBuffer keeps its size). toWire/fromWire carry such
// views as (buffer, offset, length). Checked through a real MessagePort, the channel workers use; the
// 4 GiB SharedArrayBuffer is never touched beyond one element, so it costs no memory.
import { describe, expect, it } from 'vitest';
import { MessageChannel } from 'node:worker_threads';
import { fromWire, toWire } from '../../src/network/wire.js';

function roundTrip<T>(value: T): Promise<T> {
  const { port1, port2 } = new MessageChannel();
  return new Promise((resolve) => {
    port2.once('message', (m: T) => {
      port1.close();
      resolve(m);
    });
    port1.postMessage(value);
  });
}

describe('toWire / fromWire', () => {
  const n = 2 ** 30 + 64; // Uint32 elements: 4 GiB + 256 bytes
  const sab = new SharedArrayBuffer(n * 4);
  const big = new Uint32Array(sab, 0, n);
  big[n - 1] = 7;

  it('postMessage alone truncates a view of 4 GiB (what wire.ts works around)', async () => {
    const got = await roundTrip({ big });
    expect(got.big.length).toBe(64);
  });

  it('carries views of 4 GiB and more at full length, on the same shared memory', async () => {
    const task = { net: { layers: [{ weights: big, bias: new Float32Array(sab, 4, 3) }] }, k: 5 };
    const got = fromWire(await roundTrip(toWire(task)));
    expect(got.net.layers[0]!.weights).toBeInstanceOf(Uint32Array);
    expect(got.net.layers[0]!.weights.length).toBe(n);
    expect(got.net.layers[0]!.weights[n - 1]).toBe(7);
    expect(got.net.layers[0]!.bias.length).toBe(3);
    expect(got.k).toBe(5);
    got.net.layers[0]!.weights[n - 2] = 9; // shared, not copied
    expect(big[n - 2]).toBe(9);
  });

  it('leaves tasks without such views as they are (no copy)', () => {
    const task = { net: { layers: [{ weights: new Float32Array(8) }] }, ids: new Uint32Array(4), n: 1 };
    expect(toWire(task)).toBe(task);
    expect(fromWire(task)).toBe(task);
  });
});
