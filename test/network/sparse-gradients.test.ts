// Training mode 3 (the gradient rows of the rows a slice touched) and netApplyRows (lazy Adam on given rows):
// the pair data-parallel training uses (src/train/distributed.ts). One slice's mode 3 + netApplyRows must
// leave the network exactly as mode 0 does; several slices' rows are summed id by id in list order.
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native/addon.js';
import { Network } from '../../src/network/network.js';
import type { NetSpec, RowGradients, RowUpdate } from '../../src/native/network-types.js';
import { InlineExecutor } from '../../src/network/executor.js';
import { toShared } from '../../src/datasets/csr.js';
import { ids, makeNet, randomData, randomizeBiases, snapshot } from './helpers.js';
import type { RefData } from './reference.js';

const ADAM = { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8 };

function trainMode0(net: NetSpec, data: RefData, pts: Uint32Array, seed: number, gradScale: number): Float64Array {
  const s = new Float64Array(4);
  native().netTrainSlice(net, data, pts, { mode: 0, ...ADAM, gradScale, seed }, s);
  return s;
}

function sparseGrads(net: NetSpec, data: RefData, pts: Uint32Array, seed: number, gradScale: number): { g: RowGradients[]; stats: Float64Array } {
  const stats = new Float64Array(4);
  const g = native().netTrainSlice(net, data, pts, { mode: 3, ...ADAM, gradScale, seed }, stats);
  if (!g) throw new Error('mode 3 returned nothing');
  return { g, stats };
}

const asUpdates = (g: RowGradients[]): RowUpdate[] => g.map((x, layer) => ({ layer, ...x }));

function expectIdentical(a: NetSpec, b: NetSpec): void {
  a.layers.forEach((l, k) => {
    const r = b.layers[k]!;
    for (const key of ['weights', 'bias', 'mWeights', 'vWeights', 'mBias', 'vBias', 'rowSteps', 'biasSteps'] as const) {
      expect(Buffer.from(l[key].buffer, l[key].byteOffset, l[key].byteLength).equals(Buffer.from(r[key].buffer, r[key].byteOffset, r[key].byteLength)), `layer ${k} ${key}`).toBe(true);
    }
  });
}

/** Two identical networks from one config (same seed), tables built with the same seeds. */
async function twin(config: ConstructorParameters<typeof Network>[0]): Promise<[Network, Network]> {
  const a = new Network(config), b = new Network(config);
  const ex = new InlineExecutor();
  await a.rebuildTables(ex);
  await b.rebuildTables(ex);
  return [a, b];
}

describe('mode 3 + netApplyRows equals mode 0', () => {
  it('dense 10 -> 6 -> 7 and 10 -> 6 -> 5 -> 7: three batches, state bit-identical', () => {
    const data = randomData(24, 10, 7, 11, { labelCounts: [1, 2, 3, 0] });
    for (const sizes of [[6, 7], [6, 5, 7]]) {
      const a = makeNet(10, sizes, 12);
      randomizeBiases(a, 13);
      const b: NetSpec = { layers: snapshot(a) };
      for (let t = 0; t < 3; t++) {
        const pts = ids(8, t * 8);
        const s0 = trainMode0(a, data, pts, 100 + t, 1 / 8);
        const { g, stats } = sparseGrads(b, data, pts, 100 + t, 1 / 8);
        expect(Array.from(stats)).toEqual(Array.from(s0));
        // mode 3 leaves the weights alone until the rows are applied
        native().netApplyRows(b, ADAM, asUpdates(g));
        expectIdentical(a, b);
      }
      // Dense layers return every row once, in order; layer 0 the slice's features.
      const { g } = sparseGrads(b, data, ids(8), 1, 1 / 8);
      expect(Array.from(g[1]!.ids)).toEqual([...Array(sizes[1]).keys()]);
      expect(g[0]!.rowBias).toBeNull();
      expect(g[0]!.biasVector!.length).toBe(6);
    }
  });

  it('LSH-sampled output (shared set, batch negatives, logQ) with dropout: state bit-identical', async () => {
    const train = toShared(randomData(64, 40, 300, 21, { maxNnz: 8 }));
    const config = {
      inputDim: 40, seed: 3,
      layers: [
        { size: 16, activation: 'relu' as const, dropout: 0.2 },
        { size: 300, activation: 'softmax' as const, sampling: { hash: 'dwta' as const, K: 2, L: 8, minActive: 40, batchNegatives: true } },
      ],
    };
    const [na, nb] = await twin(config);
    const logQ = new Float32Array(300).fill(0.1);
    na.spec.layers[1]!.sampling!.logQ = logQ;
    nb.spec.layers[1]!.sampling!.logQ = logQ;
    for (let t = 0; t < 4; t++) {
      const pts = ids(16, t * 16);
      const s0 = trainMode0(na.spec, train, pts, 7 + t, 1 / 16);
      const before = snapshot(nb.spec);
      const { g, stats } = sparseGrads(nb.spec, train, pts, 7 + t, 1 / 16);
      expect(Array.from(stats)).toEqual(Array.from(s0));
      expectIdentical(nb.spec, { layers: before });
      // A sampled output touches far fewer rows than it has.
      expect(g[1]!.ids.length).toBeGreaterThan(0);
      expect(g[1]!.ids.length).toBeLessThan(300);
      expect(new Set(g[1]!.ids).size).toBe(g[1]!.ids.length);
      native().netApplyRows(nb.spec, ADAM, asUpdates(g));
      expectIdentical(na.spec, nb.spec);
    }
  });
});

describe('netApplyRows', () => {
  it('sums two slices row by row in list order, then one Adam step per distinct row', () => {
    const data = randomData(16, 10, 7, 31);
    const a = makeNet(10, [6, 7], 32);
    const b: NetSpec = { layers: snapshot(a) };
    const g1 = sparseGrads(a, data, ids(8), 5, 1 / 16).g;
    const g2 = sparseGrads(a, data, ids(8, 8), 6, 1 / 16).g;
    native().netApplyRows(a, ADAM, [...asUpdates(g1), ...asUpdates(g2)]);
    // The same sums formed here in float32 (Math.fround: one rounding per addition, as in C++).
    const merged: RowUpdate[] = g1.map((x, layer) => {
      const y = g2[layer]!;
      const width = x.rows.length / Math.max(1, x.ids.length) || y.rows.length / Math.max(1, y.ids.length);
      const order: number[] = [];
      const rows = new Map<number, { r: Float32Array; b: number }>();
      const add = (u: RowGradients) => u.ids.forEach((id, e) => {
        const src = u.rows.subarray(e * width, (e + 1) * width);
        const cur = rows.get(id);
        if (!cur) {
          order.push(id);
          rows.set(id, { r: src.slice(), b: u.rowBias ? u.rowBias[e]! : 0 });
        } else {
          for (let i = 0; i < width; i++) cur.r[i] = Math.fround(cur.r[i]! + src[i]!);
          cur.b = Math.fround(cur.b + (u.rowBias ? u.rowBias[e]! : 0));
        }
      });
      add(x);
      add(y);
      const out = new Float32Array(order.length * width);
      order.forEach((id, i) => out.set(rows.get(id)!.r, i * width));
      const bv = x.biasVector && y.biasVector ? x.biasVector.map((v, i) => Math.fround(v + y.biasVector![i]!)) : null;
      return {
        layer, ids: Uint32Array.from(order), rows: out,
        rowBias: x.rowBias ? Float32Array.from(order, (id) => rows.get(id)!.b) : null,
        biasVector: bv,
      };
    });
    native().netApplyRows(b, ADAM, merged);
    expectIdentical(a, b);
    // Rows touched by both slices took one step, not two.
    expect(Math.max(...a.layers[0]!.rowSteps)).toBe(1);
    expect(a.layers[0]!.biasSteps[0]).toBe(1);
  });

  it('refuses a bad id or length before changing any weight', () => {
    const net = makeNet(10, [6, 7], 41);
    const before = snapshot(net);
    const rows = new Float32Array(6);
    expect(() => native().netApplyRows(net, ADAM, [
      { layer: 0, ids: Uint32Array.of(1), rows, biasVector: null },
      { layer: 0, ids: Uint32Array.of(10), rows, biasVector: null },
    ])).toThrow(/updates\[1\]\.ids\[0\] = 10 is not a row of layer 0 \(10 rows\)/);
    expect(() => native().netApplyRows(net, ADAM, [{ layer: 0, ids: Uint32Array.of(1, 2), rows }])).toThrow(/updates\[0\]: rows has 6 elements, expected ids.length \* row width = 12/);
    expect(() => native().netApplyRows(net, ADAM, [{ layer: 1, ids: Uint32Array.of(1), rows, rowBias: null }])).toThrow(/neuron-major layer needs rowBias/);
    expect(() => native().netApplyRows(net, ADAM, [{ layer: 2, ids: new Uint32Array(0), rows: new Float32Array(0) }])).toThrow(/layer must be < 2/);
    expectIdentical(net, { layers: before });
  });
});
