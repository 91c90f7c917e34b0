// Label-sharded training and prediction: the phases of net_shard.h and their bindings.
//   netShardInput(net, data, pointIds, training: 0|1, featureOf: Int32Array (D), outZ (pointIds.length, o_0)) -> n
//       training: the points with labels only (the others are skipped, as by netTrainSlice), in order;
//       prediction: every point. outZ[i] = sum over point i's features f held here (featureOf[f] >= 0, the row
//       of f in layer 0, which holds the rows of this rank's features) of x_f W0[featureOf[f], :], no bias.
//   netShardHidden(net, Z (n, o_0), training: 0|1, seed, outH (n, d)) -> n
//       Z summed over the ranks: A0 = act(b0 + Z), dropout (training: sample i's mask from seed and its
//       position in the pointIds of netShardInput, as netTrainSlice draws it), then the layers between layer 0
//       and the output, every neuron (a sampled middle layer: its candidates); outH = the last hidden layer.
//   netShardOutForward(net, data, rows (B), H (B, d), localOf: Int32Array (numLabels), seed, minActive,
//       logQ: Float32Array (outDim) | null, outStats (B, 3), batchNegatives = 1) -> |S|: outStats[i] = [max, sum of
//       exp(z - max), sum of the logits of i's labels this rank owns]. The active set S: every row when minActive
//       is 0; else this rank's part of one process's batch-shared set over all numLabels labels (the batch's labels
//       with batchNegatives, then uniform random ids of all labels, stream net_query_seed(seed << 32, layer), until
//       it holds minActive: net_common.cc shared_set), so that the union over the ranks is one process's set;
//       logQ (this rank's rows of one process's) is added to S's logits, and with a wide part (local label ids)
//       each sample's wide terms of labels in S (net_wide.h).
//   netShardOutBackward(net, lse: Float64Array (B), hyper { mode 0 | 2, lr, beta1, beta2, eps, gradScale,
//       wideLr (mode 0 with a wide part) }, outDH (B, d)) -> undefined (mode 2: dH only, nothing updated);
//       mode 0 also takes each wide term's Adagrad step (g = dz x), as net_train.cc's shared-set path does
//   netShardLowerBackward(net, data, dH (n, d), hyper { lr, beta1, beta2, eps }, featureOf (D)) -> undefined
//       Adam on the layers below the output from dH summed over the ranks (net_shard_lower_backward): the
//       middle layers and layer 0's bias alike on every rank, layer 0's rows of the features held here.
//   netShardScore(net, data, rows (q), H (q, d), k, outIdx (q, k), outVal (q, k), outStats (q, 2), scale = 1)
//       exact scores of this rank's output rows for the points rows of data (their wide terms; H their hidden
//       activations): the k best (logit, local id) per query, descending, ties by the smaller id, and
//       [max, sum of exp(z - max)] of every query's logits over the slice.
// The feature and label maps are checked where they are read (the entries of the batch's features and labels:
// -1 or a row held), before any weight changes. Shapes are re-checked here; TypeScript (src/train/sharded.ts)
// owns every array.
#include "net_shard.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>

#include "modules.h"
#include "napi_util.h"
#include "net_internal.h"
#include "rng.h"
#include "topk.h"

namespace sl {
namespace {

using net::grow;
constexpr uint32_t RB = nk::kRowBlock;

// State of phases 2 and 3 (per thread).
struct OutState {
  uint32_t B = 0, d = 0, ldn = 0, ldx = 0, layer = 0;
  bool ready = false;
  std::vector<float> X, Xt;           // (B, ldx), (d, ldn)
  std::vector<uint32_t> S;            // active local rows, ascending
  std::vector<float> zS;              // (|S|, ldn)
  std::vector<uint64_t> pairs;        // (position in S << 32 | sample) of every owned label, sorted
  std::vector<float> invLabels;       // (B) 1 / (labels of sample i, all ranks)
  std::vector<uint32_t> mark, pos;    // (outDim) epoch marks, position in S
  std::vector<uint64_t> inS;          // (outDim / 64) S as a bitset: the wide scan tests every pair's label
                                      // against it (a few kB that stay in cache, where the marks do not)
  std::vector<net::WideTerm> wide;    // the batch's wide terms of labels in S
  // The batch's features (a label-major wide part): featSlot (D, -1 when unused) -> slot; slot t's nonzeros
  // are (sample, x) at [featStart[t], featStart[t + 1]) of featSample/featX, samples ascending.
  std::vector<int32_t> featSlot;
  std::vector<uint32_t> featIds, featStart, featSample, featCursor;
  std::vector<float> featX;
  uint32_t epoch = 0;
  std::vector<uint32_t> gmark;        // (numLabels) epoch marks of the global shared set
  uint32_t gepoch = 0;
  std::vector<float> wg, bg, mx, sum, lse, scale, dzt, g, gb, dHt;
};
thread_local OutState tlOut;

bool Given(const Napi::Value& v) { return !v.IsUndefined() && !v.IsNull(); }

// Rows S[r0 .. r0 + R) of L into wg (R, d) and their biases (+ logQ when given) into bg (R).
void gather_rows(const NetLayer& L, const uint32_t* S, uint32_t r0, uint32_t R, float* wg, float* bg, const float* logQ) {
  const uint32_t d = L.inDim;
  for (uint32_t r = 0; r < R; ++r) {
    std::memcpy(wg + size_t(r) * d, L.W + size_t(S[r0 + r]) * d, sizeof(float) * d);
    bg[r] = L.b[S[r0 + r]] + (logQ ? logQ[S[r0 + r]] : 0.0f);
  }
}

// X (B, ldx) and Xt (d, ldn) from H (B, d), padding zero.
void load_inputs(OutState& o, const float* H, uint32_t B, uint32_t d) {
  o.B = B, o.d = d;
  o.ldn = nk::pad_to(B, nk::kSamplePad);
  o.ldx = nk::pad_to(d, nk::kDimPad);
  float* X = grow(o.X, size_t(B) * o.ldx);
  float* Xt = grow(o.Xt, size_t(d) * o.ldn);
  std::memset(X, 0, sizeof(float) * size_t(B) * o.ldx);
  std::memset(Xt, 0, sizeof(float) * size_t(d) * o.ldn);
  for (uint32_t i = 0; i < B; ++i)
    for (uint32_t j = 0; j < d; ++j) {
      X[size_t(i) * o.ldx + j] = H[size_t(i) * d + j];
      Xt[size_t(j) * o.ldn + i] = H[size_t(i) * d + j];
    }
}

// The wide terms of the labels in o.S for samples rows[0..B) into o.wide, from the label-major index (L.wideByOff):
// per label of S (ascending), its pairs (features ascending), per pair the batch's samples holding its feature
// (ascending). Only S's pairs are read (a few per label), where the feature-major scan reads every pair of every
// nonzero of the batch. A logit's terms are added, and an entry's Adagrad steps taken, in the order the scan
// gives them (features, resp. samples, ascending): the results are the same bits.
void wide_terms_of_labels(OutState& o, const NetLayer& L, const CsrView& data, const uint32_t* rows, uint32_t B) {
  const uint32_t D = L.wideD;
  const size_t nnz = L.wideOff[D];
  if (o.featSlot.size() < D) o.featSlot.assign(D, -1);
  int32_t* slot = o.featSlot.data();
  // The batch's distinct features (first-seen order) and, per feature, its (sample, x) in sample order.
  o.featIds.clear();
  size_t P = 0;
  for (uint32_t i = 0; i < B; ++i) P += data.offsets[rows[i] + 1] - data.offsets[rows[i]];
  for (uint32_t i = 0; i < B; ++i)
    for (uint32_t q = data.offsets[rows[i]]; q < data.offsets[rows[i] + 1]; ++q) {
      const uint32_t f = data.indices[q];  // < D: check_slice
      if (slot[f] < 0) slot[f] = static_cast<int32_t>(o.featIds.size()), o.featIds.push_back(f);
    }
  const uint32_t nF = static_cast<uint32_t>(o.featIds.size());
  uint32_t* start = grow(o.featStart, size_t(nF) + 1);
  uint32_t* cur = grow(o.featCursor, nF);
  uint32_t* smp = grow(o.featSample, P);
  float* xs = grow(o.featX, P);
  std::fill(start, start + nF + 1, 0u);
  for (uint32_t i = 0; i < B; ++i)
    for (uint32_t q = data.offsets[rows[i]]; q < data.offsets[rows[i] + 1]; ++q) ++start[slot[data.indices[q]] + 1];
  for (uint32_t t = 0; t < nF; ++t) start[t + 1] += start[t], cur[t] = start[t];
  for (uint32_t i = 0; i < B; ++i)
    for (uint32_t q = data.offsets[rows[i]]; q < data.offsets[rows[i] + 1]; ++q) {
      const uint32_t e = cur[slot[data.indices[q]]]++;
      smp[e] = i, xs[e] = data.values[q];
    }
  for (uint32_t j : o.S) {
    const uint32_t k0 = L.wideByOff[j], k1 = L.wideByOff[j + 1];
    if (k1 < k0 || k1 > nnz) {
      for (uint32_t f : o.featIds) slot[f] = -1;
      throw ArgError("wide.byLabel.offsets of label " + std::to_string(j) + " are corrupt");
    }
    for (uint32_t k = k0; k < k1; ++k) {
      const uint32_t f = L.wideByFeat[k], e = L.wideByEntry[k];
      if (f >= D || e >= nnz) {  // in bounds; that (f, e) is a pair of j is TypeScript's (wideByLabel)
        for (uint32_t g : o.featIds) slot[g] = -1;
        throw ArgError("wide.byLabel[" + std::to_string(k) + "] names a feature or entry out of range");
      }
      const int32_t t = slot[f];
      if (t < 0) continue;
      for (uint32_t m = start[t]; m < start[t + 1]; ++m) o.wide.push_back({j, smp[m], e, xs[m]});
    }
  }
  for (uint32_t f : o.featIds) slot[f] = -1;  // leave the map clean for the next batch
}

const NetLayer& output_of(const std::vector<NetLayer>& layers) {
  if (layers.size() < 2) throw ArgError("a sharded network needs a hidden layer below its output layer");
  return layers.back();
}

// State of phases 1, 2 and 5 on this thread (their arrays are in net::Scratch: rowsOfSlice, posOfSlice, layer).
struct LowerState {
  uint32_t n = 0;        // points of the batch (netShardInput)
  int stage = 0;         // 0 none, 1 after netShardInput, 2 after netShardHidden
  bool training = false;
};
thread_local LowerState tlLower;

// featureOf (D): checks its length and, for the features of the points rows[0..n), that each entry is -1 or a
// row of layer 0 (< inDim). Throws ArgError naming the first bad entry.
const int32_t* check_feature_map(const Span<int32_t>& featureOf, const NetLayer& L0, const CsrView& data, const uint32_t* rows,
                                 uint32_t n) {
  if (featureOf.size != L0.featureDim)
    throw ArgError("featureOf has " + std::to_string(featureOf.size) + " elements, expected the network's " + std::to_string(L0.featureDim) + " input features");
  const int32_t rowsHeld = static_cast<int32_t>(L0.inDim);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t q = data.offsets[rows[i]]; q < data.offsets[rows[i] + 1]; ++q) {
      const int32_t r = featureOf.data[data.indices[q]];
      if (r < -1 || r >= rowsHeld)
        throw ArgError("featureOf[" + std::to_string(data.indices[q]) + "] = " + std::to_string(r) + " is not -1 or a row of layer 0 (< " + std::to_string(rowsHeld) + ")");
    }
  return featureOf.data;
}

// netShardInput(net, data, pointIds, training, featureOf, outZ) -> n
Napi::Value NetShardInput(const Napi::CallbackInfo& info) {
  const std::vector<NetLayer>& layers = net_parse_layers(info[0], true);
  const bool training = GetU32(info[3], "training") != 0;
  const CsrView data = net_parse_data(info[1], training);
  auto pointIds = GetArray<uint32_t>(info[2], "pointIds");
  const NetLayer& L0 = layers[0];
  output_of(layers);
  if (pointIds.size > 0xFFFFFFFFu) throw ArgError("pointIds is too long");
  const uint32_t nAll = static_cast<uint32_t>(pointIds.size), d0 = L0.outDim;
  auto outZ = GetArray<float>(info[5], "outZ", size_t(nAll) * d0);
  tlLower.stage = 0;
  // Labels are only counted here (labelOffsets has points + 1 entries: net_parse_data); netShardOutForward checks them.
  net::check_slice(data, pointIds.data, nAll, L0.featureDim, false, 0);
  net::Scratch& s = net::scratch();
  uint32_t* rows = grow(s.rowsOfSlice, nAll);
  uint32_t* pos = grow(s.posOfSlice, nAll);
  uint32_t n = 0;
  for (uint32_t i = 0; i < nAll; ++i) {
    const uint32_t r = pointIds.data[i];
    if (!training || data.labelOffsets[r + 1] > data.labelOffsets[r]) rows[n] = r, pos[n] = i, ++n;
  }
  const int32_t* featureOf = check_feature_map(GetArray<int32_t>(info[4], "featureOf"), L0, data, rows, n);
  net::FtzScope ftz;
  if (n > 0) nk::sparse_partial_forward(outZ.data, d0, L0.W, d0, rows, n, data.offsets, data.indices, data.values, featureOf);
  tlLower = LowerState{n, 1, training};
  return Napi::Number::New(info.Env(), n);
}

// netShardHidden(net, Z, training, seed, outH) -> n
Napi::Value NetShardHidden(const Napi::CallbackInfo& info) {
  const std::vector<NetLayer>& layers = net_parse_layers(info[0], true);
  const NetLayer& last = output_of(layers);
  const NetLayer& L0 = layers[0];
  const bool training = GetU32(info[2], "training") != 0;
  const uint32_t seed = GetU32(info[3], "seed");
  LowerState& st = tlLower;
  if (st.stage != 1 || st.training != training)
    throw ArgError("netShardHidden: no netShardInput (with the same training flag) on this thread before it");
  const uint32_t n = st.n, d0 = L0.outDim, d = last.inDim, nLayers = static_cast<uint32_t>(layers.size());
  auto Z = GetArray<float>(info[1], "Z", size_t(n) * d0);
  auto outH = GetArray<float>(info[4], "outH", size_t(n) * d);
  st.stage = 0;
  if (n == 0) {
    st.stage = 2;
    return Napi::Number::New(info.Env(), 0);
  }
  net::FtzScope ftz;
  net::Scratch& s = net::scratch();
  if (s.layer.size() < nLayers) s.layer.resize(nLayers);
  net::ForwardCtx c;
  c.n = n;
  c.ldn = nk::pad_to(n, nk::kSamplePad);
  c.rows = s.rowsOfSlice.data();
  c.useSampling = training;
  c.training = training;
  c.seed = seed;
  c.fillSeed = seed;
  c.positions = s.posOfSlice.data();
  net::LayerBuf& b0 = s.layer[0];
  b0.lda = nk::pad_to(d0, nk::kDimPad);
  float* A = grow(b0.A, size_t(n) * b0.lda);
  for (uint32_t i = 0; i < n; ++i) {
    float* a = A + size_t(i) * b0.lda;
    const float* z = Z.data + size_t(i) * d0;
    for (uint32_t j = 0; j < d0; ++j) a[j] = L0.b[j] + z[j];
    std::memset(a + d0, 0, sizeof(float) * (b0.lda - d0));
  }
  net::finish_layer0(L0, b0, c);
  net::forward_upper(layers.data(), nLayers, c, s);
  const net::LayerBuf& top = s.layer[nLayers - 2];
  for (uint32_t i = 0; i < n; ++i) std::memcpy(outH.data + size_t(i) * d, top.A.data() + size_t(i) * top.lda, sizeof(float) * d);
  st.stage = 2;
  return Napi::Number::New(info.Env(), n);
}

// netShardOutForward(net, data, rows, H, localOf, seed, outStats) -> |S|
Napi::Value NetShardOutForward(const Napi::CallbackInfo& info) {
  const std::vector<NetLayer>& layers = net_parse_layers(info[0], true);
  const CsrView data = net_parse_data(info[1], true);
  auto rowsA = GetArray<uint32_t>(info[2], "rows");
  const NetLayer& L = output_of(layers);
  const uint32_t d = L.inDim, N = L.outDim;
  if (rowsA.size > 0xFFFFFFFFu) throw ArgError("rows is too long");
  const uint32_t B = static_cast<uint32_t>(rowsA.size);
  auto H = GetArray<float>(info[3], "H");
  if (H.size != size_t(B) * d) throw ArgError("H has " + std::to_string(H.size) + " elements, expected rows.length * d = " + std::to_string(size_t(B) * d));
  auto localOf = GetArray<int32_t>(info[4], "localOf");
  const uint32_t seed = GetU32(info[5], "seed");
  const uint32_t minActive = GetU32(info[6], "minActive");
  const float* logQ = nullptr;
  if (!info[7].IsNull() && !info[7].IsUndefined()) {
    auto lq = GetArray<float>(info[7], "logQ");
    if (lq.size != N) throw ArgError("logQ has " + std::to_string(lq.size) + " elements, expected the slice's " + std::to_string(N));
    logQ = lq.data;
  }
  auto stats = GetArray<double>(info[8], "outStats", size_t(B) * 3);
  const bool batchNegatives = !Given(info[9]) || GetU32(info[9], "batchNegatives") != 0;
  if (localOf.size > 0xFFFFFFFFu) throw ArgError("localOf is too long");
  net::check_slice(data, rowsA.data, B, layers[0].featureDim, true, static_cast<uint32_t>(localOf.size));
  // The entries of the batch's labels (the only ones read): -1 (another rank's) or a row of the slice.
  for (uint32_t i = 0; i < B; ++i)
    for (uint32_t q = data.labelOffsets[rowsA.data[i]]; q < data.labelOffsets[rowsA.data[i] + 1]; ++q) {
      const int32_t lo = localOf.data[data.labelIndices[q]];
      if (lo < -1 || lo >= int32_t(N))
        throw ArgError("localOf[" + std::to_string(data.labelIndices[q]) + "] = " + std::to_string(lo) + " is not -1 or a row of the output slice (< " + std::to_string(N) + ")");
    }
  net::FtzScope ftz;
  OutState& o = tlOut;
  o.ready = false;
  o.layer = static_cast<uint32_t>(layers.size() - 1);
  load_inputs(o, H.data, B, d);
  const uint32_t ldn = o.ldn;
  // The active set S: every row of a dense output; else this rank's labels of the batch, then uniform random
  // rows of the slice (one stream per batch seed) until |S| >= minActive (every row when that is over half).
  o.S.clear();
  uint32_t* mark = grow(o.mark, N);
  uint32_t* posS = grow(o.pos, N);
  if (++o.epoch == 0) {
    std::fill(o.mark.begin(), o.mark.end(), 0u);
    o.epoch = 1;
  }
  const uint32_t ep = o.epoch;
  auto add = [&](uint32_t j) {
    if (mark[j] != ep) mark[j] = ep, o.S.push_back(j);
  };
  const uint32_t* rows = rowsA.data;
  float* invLabels = grow(o.invLabels, B);
  for (uint32_t i = 0; i < B; ++i) {
    const uint32_t q0 = data.labelOffsets[rows[i]], q1 = data.labelOffsets[rows[i] + 1];
    invLabels[i] = q1 > q0 ? 1.0f / float(q1 - q0) : 0.0f;
  }
  if (minActive == 0) {
    for (uint32_t j = 0; j < N; ++j) add(j);
  } else {
    // One process's shared set over all G labels (net_common.cc shared_set): the batch's distinct labels (with
    // batchNegatives), then ids drawn uniformly from all G labels by the batch's stream until it holds
    // minActive (every label when that is over half). This rank keeps the ids it owns: the union over the
    // ranks is one process's set, whatever the number of ranks.
    const uint32_t G = static_cast<uint32_t>(localOf.size);
    if (o.gmark.size() < G) o.gmark.assign(G, 0u);
    if (++o.gepoch == 0) {
      std::fill(o.gmark.begin(), o.gmark.end(), 0u);
      o.gepoch = 1;
    }
    uint32_t* gm = o.gmark.data();
    const uint32_t ge = o.gepoch;
    uint32_t nS = 0;
    auto take = [&](uint32_t g) {
      gm[g] = ge, ++nS;
      if (localOf.data[g] >= 0) add(uint32_t(localOf.data[g]));
    };
    if (batchNegatives)
      for (uint32_t i = 0; i < B; ++i)
        for (uint32_t q = data.labelOffsets[rows[i]]; q < data.labelOffsets[rows[i] + 1]; ++q)
          if (gm[data.labelIndices[q]] != ge) take(data.labelIndices[q]);
    const uint32_t target = std::min(minActive, G);
    if (nS < target) {
      if (uint64_t(target) * 2 > G) {
        for (uint32_t g = 0; g < G; ++g)
          if (gm[g] != ge) take(g);
      } else {
        SplitMix64 rng(net_query_seed(uint64_t(seed) << 32, o.layer));
        while (nS < target) {
          const uint32_t g = rng.below(G);
          if (gm[g] != ge) take(g);
        }
      }
    }
    std::sort(o.S.begin(), o.S.end());
  }
  const uint32_t nS = static_cast<uint32_t>(o.S.size());
  for (uint32_t r = 0; r < nS; ++r) posS[o.S[r]] = r;
  o.pairs.clear();
  for (uint32_t i = 0; i < B; ++i)
    for (uint32_t q = data.labelOffsets[rows[i]]; q < data.labelOffsets[rows[i] + 1]; ++q) {
      const int32_t lo = localOf.data[data.labelIndices[q]];
      if (lo >= 0) o.pairs.push_back(uint64_t(posS[lo]) << 32 | i);
    }
  std::sort(o.pairs.begin(), o.pairs.end());
  float* zS = grow(o.zS, size_t(nS) * ldn);
  float* wg = grow(o.wg, size_t(RB) * d);
  float* bg = grow(o.bg, RB);
  for (uint32_t r0 = 0; r0 < nS; r0 += RB) {
    const uint32_t R = std::min(RB, nS - r0);
    gather_rows(L, o.S.data(), r0, R, wg, bg, logQ);
    nk::blk_forward(zS + size_t(r0) * ldn, wg, d, bg, o.Xt.data(), R, ldn);
  }
  // The wide part: each sample's terms of labels in S join their logits (terms of other labels are dropped,
  // as their logits are).
  o.wide.clear();
  if (L.hasWide && L.wideByOff) {
    wide_terms_of_labels(o, L, data, rows, B);
    for (const net::WideTerm& t : o.wide) zS[size_t(posS[t.label]) * ldn + t.sample] += t.x * L.wideW[t.entry];
  } else if (L.hasWide) {
    uint64_t* inS = grow(o.inS, (size_t(N) + 63) / 64);
    std::memset(inS, 0, sizeof(uint64_t) * ((size_t(N) + 63) / 64));
    for (uint32_t j : o.S) inS[j >> 6] |= uint64_t(1) << (j & 63);
    net::wide_terms(o.wide, L, data, rows, B, [inS](uint32_t j) { return (inS[j >> 6] >> (j & 63)) & 1; });
    for (const net::WideTerm& t : o.wide) zS[size_t(posS[t.label]) * ldn + t.sample] += t.x * L.wideW[t.entry];
  }
  float* mx = grow(o.mx, ldn);
  float* sum = grow(o.sum, ldn);
  std::fill(mx, mx + ldn, -std::numeric_limits<float>::infinity());
  std::fill(sum, sum + ldn, 0.0f);
  for (uint32_t r0 = 0; r0 < nS; r0 += RB) nk::lse_update(mx, sum, zS + size_t(r0) * ldn, std::min(RB, nS - r0), ldn);
  for (uint32_t i = 0; i < B; ++i) {
    stats.data[3 * i] = mx[i];
    stats.data[3 * i + 1] = sum[i];
    stats.data[3 * i + 2] = 0;
  }
  for (uint64_t p : o.pairs) stats.data[3 * uint32_t(p) + 2] += zS[size_t(p >> 32) * ldn + uint32_t(p)];
  o.ready = true;
  return Napi::Number::New(info.Env(), nS);
}

// netShardOutBackward(net, lse, hyper, outDH)
Napi::Value NetShardOutBackward(const Napi::CallbackInfo& info) {
  const std::vector<NetLayer>& layers = net_parse_layers(info[0], true);
  const NetLayer& L = output_of(layers);
  OutState& o = tlOut;
  if (!o.ready) throw ArgError("netShardOutBackward: no netShardOutForward on this thread since the last backward");
  const uint32_t B = o.B, d = o.d, ldn = o.ldn, ldx = o.ldx, nS = static_cast<uint32_t>(o.S.size());
  if (L.inDim != d || layers.size() - 1 != o.layer) throw ArgError("netShardOutBackward: the network differs from the forward's");
  for (uint32_t j : o.S)
    if (j >= L.outDim) throw ArgError("netShardOutBackward: the network differs from the forward's");
  const size_t wideNnz = L.hasWide ? L.wideOff[L.wideD] : 0;
  for (const net::WideTerm& t : o.wide)
    if (t.entry >= wideNnz) throw ArgError("netShardOutBackward: the network differs from the forward's (its wide part)");
  auto lseIn = GetArray<double>(info[1], "lse", B);
  Napi::Object ho = GetObject(info[2], "hyper");
  TrainHyper h;
  h.mode = GetU32Prop(ho, "mode");
  if (h.mode != 0 && h.mode != 2) throw ArgError("hyper.mode must be 0 (adam) or 2 (dH only)");
  if (h.mode == 0) net_parse_adam(ho, h);
  if (h.mode == 0 && L.hasWide) net_parse_wide_lr(ho, h);
  h.gradScale = static_cast<float>(GetF64Prop(ho, "gradScale"));
  if (!std::isfinite(h.gradScale)) throw ArgError("hyper.gradScale must be finite");
  auto dH = GetArray<float>(info[3], "outDH", size_t(B) * d);
  o.ready = false;
  net::FtzScope ftz;
  float* lse = grow(o.lse, ldn);
  float* scale = grow(o.scale, ldn);
  for (uint32_t i = 0; i < ldn; ++i) {
    lse[i] = i < B ? static_cast<float>(lseIn.data[i]) : 0.0f;
    scale[i] = i < B && o.invLabels[i] > 0.0f ? h.gradScale : 0.0f;
  }
  float* dHt = grow(o.dHt, size_t(d) * ldn);
  std::memset(dHt, 0, sizeof(float) * size_t(d) * ldn);
  float* dzt = grow(o.dzt, size_t(RB) * ldn);
  float* g = grow(o.g, size_t(RB) * ldx);
  float* gb = grow(o.gb, RB);
  float* wg = grow(o.wg, size_t(RB) * d);
  float* bg = grow(o.bg, RB);
  nk::AdamCorrection corr;
  corr.init(h.beta1, h.beta2);
  const uint64_t* pairs = o.pairs.data();
  const size_t nPairs = o.pairs.size();
  size_t pp = 0;
  for (uint32_t r0 = 0; r0 < nS; r0 += RB) {
    const uint32_t R = std::min(RB, nS - r0);
    nk::softmax_scaled(dzt, o.zS.data() + size_t(r0) * ldn, lse, scale, R, ldn);
    for (; pp < nPairs && (pairs[pp] >> 32) < r0 + R; ++pp) {
      const uint32_t i = uint32_t(pairs[pp]);
      dzt[size_t((pairs[pp] >> 32) - r0) * ldn + i] -= h.gradScale * o.invLabels[i];
    }
    if (L.hasWide) std::memcpy(o.zS.data() + size_t(r0) * ldn, dzt, sizeof(float) * size_t(R) * ldn);  // zS now holds dz
    nk::blk_grad(g, gb, dzt, o.X.data(), R, B, ldn, ldx);
    gather_rows(L, o.S.data(), r0, R, wg, bg, nullptr);
    nk::blk_dx(dHt, wg, d, dzt, R, ldn);
    if (h.mode == 0)
      for (uint32_t r = 0; r < R; ++r) {
        const uint32_t j = o.S[r0 + r];
        corr.at(nk::bump_step(L.rowSteps + j));
        const nk::AdamStep a{h.lr, h.beta1, h.beta2, h.eps, corr.ibc1, corr.ibc2};
        nk::adam_row(L.W + size_t(j) * d, L.mW + size_t(j) * d, L.vW + size_t(j) * d, g + size_t(r) * ldx, d, a);
        nk::adam_row(L.b + j, L.mb + j, L.vb + j, gb + r, 1, a);
      }
  }
  // The wide terms' Adagrad steps (mode 0; mode 2 changes nothing); they do not feed dH.
  const uint32_t* posS = o.pos.data();
  for (const net::WideTerm& t : o.wide) net::wide_step(L, t, o.zS[size_t(posS[t.label]) * ldn + t.sample], h);
  for (uint32_t i = 0; i < B; ++i)
    for (uint32_t j = 0; j < d; ++j) dH.data[size_t(i) * d + j] = dHt[size_t(j) * ldn + i];
  return info.Env().Undefined();
}

// netShardLowerBackward(net, data, dH, hyper, featureOf)
Napi::Value NetShardLowerBackward(const Napi::CallbackInfo& info) {
  const std::vector<NetLayer>& layers = net_parse_layers(info[0], true);
  const CsrView data = net_parse_data(info[1], false);
  const NetLayer& last = output_of(layers);
  LowerState& st = tlLower;
  if (st.stage != 2 || !st.training) throw ArgError("netShardLowerBackward: no training netShardHidden on this thread before it");
  const uint32_t n = st.n;
  auto dH = GetArray<float>(info[2], "dH", size_t(n) * last.inDim);
  TrainHyper h;
  h.mode = 0;
  net_parse_adam(GetObject(info[3], "hyper"), h);
  const net::Scratch& s = net::scratch();
  for (uint32_t i = 0; i < n; ++i)
    if (s.rowsOfSlice[i] >= data.points) throw ArgError("netShardLowerBackward: the forward's rows are not in data");
  net::check_slice(data, s.rowsOfSlice.data(), n, layers[0].featureDim, false, 0);
  const int32_t* featureOf = check_feature_map(GetArray<int32_t>(info[4], "featureOf"), layers[0], data, s.rowsOfSlice.data(), n);
  st.stage = 0;
  net_shard_lower_backward(layers.data(), static_cast<uint32_t>(layers.size()), data, n, dH.data, h, featureOf);
  return info.Env().Undefined();
}

// netShardScore(net, data, rows, H, k, outIdx, outVal, outStats)
Napi::Value NetShardScore(const Napi::CallbackInfo& info) {
  const std::vector<NetLayer>& layers = net_parse_layers(info[0], false);
  const NetLayer& L = output_of(layers);
  const uint32_t d = L.inDim, N = L.outDim;
  const CsrView data = net_parse_data(info[1], false);
  auto rowsA = GetArray<uint32_t>(info[2], "rows");
  if (rowsA.size > 0xFFFFFFFFu) throw ArgError("rows is too long");
  const uint32_t q = static_cast<uint32_t>(rowsA.size);
  const uint32_t k = GetU32(info[4], "k");
  if (k == 0) throw ArgError("k must be positive");
  auto H = GetArray<float>(info[3], "H", size_t(q) * d);
  net::check_slice(data, rowsA.data, q, layers[0].featureDim, false, 0);
  auto outIdx = GetArray<uint32_t>(info[5], "outIdx", size_t(q) * k);
  auto outVal = GetArray<float>(info[6], "outVal", size_t(q) * k);
  auto outStats = GetArray<double>(info[7], "outStats", size_t(q) * 2);
  // The network's logits times `scale` before the wide part's scores are added (ValidationOptions.blend), as
  // net_predict_slice's exact path scales them.
  const float scale = Given(info[8]) ? static_cast<float>(GetF64(info[8], "scale")) : 1.0f;
  if (!std::isfinite(scale)) throw ArgError("scale must be finite");
  net::FtzScope ftz;
  OutState& o = tlOut;
  o.ready = false;
  constexpr uint32_t kChunk = 256;  // queries per pass over the rows
  std::vector<float> zt(size_t(RB) * nk::pad_to(kChunk, nk::kSamplePad));
  std::vector<float> heapV;
  std::vector<uint32_t> heapI;
  for (uint32_t q0 = 0; q0 < q; q0 += kChunk) {
    const uint32_t nq = std::min(kChunk, q - q0);
    load_inputs(o, H.data + size_t(q0) * d, nq, d);
    const uint32_t ldn = o.ldn;
    // The chunk's wide terms by label, met block by block.
    o.wide.clear();
    if (L.hasWide) {
      net::wide_terms(o.wide, L, data, rowsA.data + q0, nq);
      net::wide_sort_by_label(o.wide);
    }
    size_t wp = 0;
    float* mx = grow(o.mx, ldn);
    float* sum = grow(o.sum, ldn);
    std::fill(mx, mx + ldn, -std::numeric_limits<float>::infinity());
    std::fill(sum, sum + ldn, 0.0f);
    // Per query a min-heap of its k best (value, id): the root is the worst kept.
    heapV.assign(size_t(nq) * k, -std::numeric_limits<float>::infinity());
    heapI.assign(size_t(nq) * k, UINT32_MAX);
    std::vector<uint32_t> fill(nq, 0);
    auto worse = [](float va, uint32_t ia, float vb, uint32_t ib) { return va < vb || (va == vb && ia > ib); };
    for (uint32_t r0 = 0; r0 < N; r0 += RB) {
      const uint32_t R = std::min(RB, N - r0);
      nk::blk_forward(zt.data(), L.W + size_t(r0) * d, d, L.b + r0, o.Xt.data(), R, ldn);
      if (scale != 1.0f)
        for (size_t e = 0, n = size_t(R) * ldn; e < n; ++e) zt[e] *= scale;
      net::wide_add_block(zt.data(), ldn, L, o.wide, wp, r0, R);
      nk::lse_update(mx, sum, zt.data(), R, ldn);
      for (uint32_t r = 0; r < R; ++r)
        for (uint32_t i = 0; i < nq; ++i) {
          const float v = zt[size_t(r) * ldn + i];
          const uint32_t id = r0 + r;
          float* hv = heapV.data() + size_t(i) * k;
          uint32_t* hi = heapI.data() + size_t(i) * k;
          uint32_t& f = fill[i];
          if (f < k) {  // sift up
            uint32_t c = f++;
            while (c > 0) {
              const uint32_t p = (c - 1) / 2;
              if (!worse(v, id, hv[p], hi[p])) break;
              hv[c] = hv[p], hi[c] = hi[p], c = p;
            }
            hv[c] = v, hi[c] = id;
          } else if (worse(hv[0], hi[0], v, id)) {  // replace the root, sift down
            uint32_t c = 0;
            for (;;) {
              uint32_t m = 2 * c + 1;
              if (m >= k) break;
              if (m + 1 < k && worse(hv[m + 1], hi[m + 1], hv[m], hi[m])) ++m;
              if (!worse(hv[m], hi[m], v, id)) break;
              hv[c] = hv[m], hi[c] = hi[m], c = m;
            }
            hv[c] = v, hi[c] = id;
          }
        }
    }
    for (uint32_t i = 0; i < nq; ++i) {
      const size_t base = size_t(q0 + i) * k;
      std::vector<std::pair<float, uint32_t>> v;
      for (uint32_t e = 0; e < fill[i]; ++e) v.emplace_back(heapV[size_t(i) * k + e], heapI[size_t(i) * k + e]);
      std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
      for (uint32_t e = 0; e < k; ++e) {
        outIdx.data[base + e] = e < v.size() ? v[e].second : UINT32_MAX;
        outVal.data[base + e] = e < v.size() ? v[e].first : -std::numeric_limits<float>::infinity();
      }
      outStats.data[2 * (q0 + i)] = mx[i];
      outStats.data[2 * (q0 + i) + 1] = sum[i];
    }
  }
  return info.Env().Undefined();
}

// The clusters one process probes for each of the q queries of load_inputs (o.Xt, o.ldn) under an index of C centres
// (C, d + 2) whose sizes (every rank's members) count against the budget after the head's headTotal labels, as
// net::cluster_active_sets probes them: by descending centre score [h, 1, 0] . centre (a NaN last: probe_score; ties by the smaller
// cluster), until the budget is reached. Query i's clusters, in probe order, are clusters[offsets[i] ..
// offsets[i + 1]) (offsets (q + 1)). A query's centre scores are computed alone in its lane of the blocked kernel, so
// a query probes the same clusters in any batch of queries (the ranks split the queries: sharded-index.ts).
void probe_clusters(const OutState& o, uint32_t q, uint32_t d, const float* cent, uint32_t C, const uint32_t* sizes,
                    uint32_t headTotal, uint32_t budget, std::vector<uint32_t>& offsets, std::vector<uint32_t>& clusters) {
  const uint32_t w = d + 2, ldn = o.ldn;
  std::vector<float> Xc(size_t(w) * ldn, 0.0f), zc(size_t(C) * ldn), zero(RB, 0.0f);
  std::memcpy(Xc.data(), o.Xt.data(), sizeof(float) * size_t(d) * ldn);
  for (uint32_t i = 0; i < q; ++i) Xc[size_t(d) * ldn + i] = 1.0f;
  for (uint32_t c0 = 0; c0 < C; c0 += RB) {
    const uint32_t R = std::min(RB, C - c0);
    nk::blk_forward(zc.data() + size_t(c0) * ldn, cent + size_t(c0) * w, w, zero.data(), Xc.data(), R, ldn);
  }
  std::vector<uint32_t> order(C);
  offsets.assign(size_t(q) + 1, 0);
  clusters.clear();
  for (uint32_t i = 0; i < q; ++i) {
    std::iota(order.begin(), order.end(), 0u);
    uint32_t sorted = 0;
    uint64_t taken = headTotal;
    for (uint32_t p = 0; p < C && taken < budget; ++p) {
      if (p == sorted) {
        const uint32_t end = std::min(C, sorted + 32);
        std::partial_sort(order.begin() + sorted, order.begin() + end, order.end(), [&](uint32_t x, uint32_t y) {
          const float zx = net::probe_score(zc[size_t(x) * ldn + i]), zy = net::probe_score(zc[size_t(y) * ldn + i]);
          return zx > zy || (zx == zy && x < y);
        });
        sorted = end;
      }
      clusters.push_back(order[p]);
      taken += sizes[order[p]];
    }
    offsets[i + 1] = static_cast<uint32_t>(clusters.size());
  }
}

struct ProbeIndex {
  const float* cent;
  uint32_t C;
  const uint32_t* sizes;
  uint32_t headTotal, budget;
};

ProbeIndex parse_probe_index(const Napi::Value& v, uint32_t d) {
  Napi::Object ix = GetObject(v, "index");
  auto cent = GetArrayProp<float>(ix, "centroids");
  const uint32_t w = d + 2;
  if (cent.size % w != 0 || cent.size / w > 0xFFFFFFFFu) throw ArgError("index.centroids must hold rows of d + 2");
  const uint32_t C = static_cast<uint32_t>(cent.size / w);
  auto sizes = GetArrayProp<uint32_t>(ix, "sizes", C);
  return {cent.data, C, sizes.data, GetU32Prop(ix, "headTotal"), GetU32Prop(ix, "budget")};
}

// netShardProbe(net, H (q, d), index, out { counts (q), clusters (q, C) })
// The clusters one process probes for each of q points (probe_clusters) under a cluster index built across the ranks
// (index: centroids, sizes, headTotal, budget, as netShardSampledScore takes it): point i's counts[i] clusters in
// probe order at clusters[i C ..]. The ranks split a chunk's points for this (sharded-index.ts) and exchange the lists.
Napi::Value NetShardProbe(const Napi::CallbackInfo& info) {
  const std::vector<NetLayer>& layers = net_parse_layers(info[0], false);
  const uint32_t d = output_of(layers).inDim;
  auto H = GetArray<float>(info[1], "H");
  if (H.size % d != 0 || H.size / d > 0xFFFFFFFFu) throw ArgError("H must hold rows of the output layer's input width");
  const uint32_t q = static_cast<uint32_t>(H.size / d);
  const ProbeIndex px = parse_probe_index(info[2], d);
  Napi::Object oo = GetObject(info[3], "out");
  uint32_t* counts = GetArrayProp<uint32_t>(oo, "counts", q).data;
  uint32_t* outC = GetArrayProp<uint32_t>(oo, "clusters", size_t(q) * px.C).data;
  net::FtzScope ftz;
  OutState& o = tlOut;
  o.ready = false;
  if (q == 0 || px.C == 0) {
    std::fill(counts, counts + q, 0u);
    return info.Env().Undefined();
  }
  load_inputs(o, H.data, q, d);
  std::vector<uint32_t> offsets, clusters;
  probe_clusters(o, q, d, px.cent, px.C, px.sizes, px.headTotal, px.budget, offsets, clusters);
  for (uint32_t i = 0; i < q; ++i) {
    counts[i] = offsets[i + 1] - offsets[i];
    std::copy(clusters.begin() + offsets[i], clusters.begin() + offsets[i + 1], outC + size_t(i) * px.C);
  }
  return info.Env().Undefined();
}

// netShardSampledScore(net, data, rows (q), H (q, d), index, k, scales | null, wideExtra, out, prop | null, probes | null)
// -> outputs
// scored
// Sampled prediction of a label-sharded rank: what net_predict_slice's cluster-index path does for the whole output
// layer, restricted to this rank's labels, so that the ranks' results merged are one process's. index: the part of a
// cluster index built across the ranks (src/train/sharded-index.ts) { centroids (C, d + 2), offsets (C + 1) and
// members (this rank's rows of each cluster), sizes (C: every rank's members of each cluster), head (this rank's rows of
// the head), headTotal (the whole head), budget }: every rank probes the clusters one process probes (the global sizes
// count against the budget) and scores its own members of them and its own head rows. The wide part proposes labels
// that are no candidate, and one process keeps the wideExtra best (score, id) of them over every label
// (net::wide_candidates). out { idx (q, S, k), val (q, S, k), lse (q, S, 2) }: per query and scale the k best (row, raw
// score scale x z + zw; ties by the smaller row) and the [max, sum of exp(score - max)] of the scored labels. Without
// prop (one rank: its proposals are every label's) the wideExtra best proposals join the candidates, as one process
// takes them. With prop { idx (q, wideExtra), val (q, wideExtra), comb (q, S, wideExtra) } (several ranks) out covers
// the candidates alone, and prop gets this rank's wideExtra best proposals, best first (local rows, their wide
// scores, and their raw scores at each scale; UINT32_MAX / -inf past the count): the caller keeps the wideExtra best over every rank
// and merges them with the ranks' candidates. Returns the outputs scored (in the second form the candidates only).
Napi::Value NetShardSampledScore(const Napi::CallbackInfo& info) {
  const std::vector<NetLayer>& layers = net_parse_layers(info[0], false);
  const NetLayer& L = output_of(layers);
  const uint32_t d = L.inDim, N = L.outDim, w = d + 2;
  const CsrView data = net_parse_data(info[1], false);
  auto rowsA = GetArray<uint32_t>(info[2], "rows");
  if (rowsA.size > 0xFFFFFFFFu) throw ArgError("rows is too long");
  const uint32_t q = static_cast<uint32_t>(rowsA.size);
  auto H = GetArray<float>(info[3], "H", size_t(q) * d);
  net::check_slice(data, rowsA.data, q, layers[0].featureDim, false, 0);
  Napi::Object ix = GetObject(info[4], "index");
  auto cent = GetArrayProp<float>(ix, "centroids");
  if (cent.size % w != 0 || cent.size / w > 0xFFFFFFFFu) throw ArgError("index.centroids must hold rows of d + 2");
  const uint32_t C = static_cast<uint32_t>(cent.size / w);
  auto off = GetArrayProp<uint32_t>(ix, "offsets", size_t(C) + 1);
  auto mem = GetArrayProp<uint32_t>(ix, "members");
  auto sizes = GetArrayProp<uint32_t>(ix, "sizes", C);
  auto head = GetArrayProp<uint32_t>(ix, "head");
  const uint32_t headTotal = GetU32Prop(ix, "headTotal"), budget = GetU32Prop(ix, "budget");
  if (off.data[0] != 0 || off.data[C] != mem.size) throw ArgError("index.offsets must run from 0 to members.length");
  for (uint32_t c = 0; c < C; ++c)
    if (off.data[c] > off.data[c + 1]) throw ArgError("index.offsets decrease at cluster " + std::to_string(c));
  for (size_t e = 0; e < mem.size; ++e)
    if (mem.data[e] >= N) throw ArgError("index.members holds a row >= the slice's " + std::to_string(N));
  for (size_t e = 0; e < head.size; ++e)
    if (head.data[e] >= N) throw ArgError("index.head holds a row >= the slice's " + std::to_string(N));
  const uint32_t k = GetU32(info[5], "k");
  if (k == 0) throw ArgError("k must be positive");
  static const float kOne = 1.0f;
  const float* scales = &kOne;
  uint32_t S = 1;
  if (Given(info[6])) {
    auto sc = GetArray<float>(info[6], "scales");
    if (sc.size == 0 || sc.size > 64) throw ArgError("scales must hold 1 to 64 values");
    scales = sc.data, S = static_cast<uint32_t>(sc.size);
  }
  const uint32_t extra = L.hasWide ? GetU32(info[7], "wideExtra") : 0;
  Napi::Object oo = GetObject(info[8], "out");
  uint32_t* outIdx = GetArrayProp<uint32_t>(oo, "idx", size_t(q) * S * k).data;
  float* outVal = GetArrayProp<float>(oo, "val", size_t(q) * S * k).data;
  double* outLse = GetArrayProp<double>(oo, "lse", size_t(q) * S * 2).data;
  // prop: the proposals apart (several ranks); only with a wide part.
  const bool apart = Given(info[9]) && extra > 0;
  uint32_t* propIdx = nullptr;
  float *propVal = nullptr, *propComb = nullptr;
  if (apart) {
    Napi::Object po = GetObject(info[9], "prop");
    propIdx = GetArrayProp<uint32_t>(po, "idx", size_t(q) * extra).data;
    propVal = GetArrayProp<float>(po, "val", size_t(q) * extra).data;
    propComb = GetArrayProp<float>(po, "comb", size_t(q) * S * extra).data;
  }
  net::FtzScope ftz;
  OutState& o = tlOut;
  o.ready = false;
  net::Scratch& s = net::scratch();
  if (q == 0) return Napi::Number::New(info.Env(), 0);
  load_inputs(o, H.data, q, d);
  const uint32_t ldn = o.ldn;
  // The clusters each query probes: given, or from the centre scores here.
  std::vector<uint32_t> pOff, pCl;
  if (Given(info[10])) {
    Napi::Object po = GetObject(info[10], "probes");
    auto offA = GetArrayProp<uint32_t>(po, "offsets", size_t(q) + 1);
    auto clA = GetArrayProp<uint32_t>(po, "clusters");
    if (offA.data[0] != 0 || offA.data[q] != clA.size) throw ArgError("probes.offsets must run from 0 to clusters.length");
    for (uint32_t i = 0; i < q; ++i)
      if (offA.data[i] > offA.data[i + 1]) throw ArgError("probes.offsets decrease at query " + std::to_string(i));
    for (size_t e = 0; e < clA.size; ++e)
      if (clA.data[e] >= C) throw ArgError("probes.clusters holds a cluster >= the index's " + std::to_string(C));
    pOff.assign(offA.data, offA.data + q + 1);
    pCl.assign(clA.data, clA.data + clA.size);
  } else {
    probe_clusters(o, q, d, cent.data, C, sizes.data, headTotal, budget, pOff, pCl);
  }
  // Head scores (|head|, ldn) with the blocked kernels on gathered rows (as one process scores its head).
  const uint32_t nH = static_cast<uint32_t>(head.size);
  std::vector<float> zH;
  if (nH) {
    zH.resize(size_t(nH) * ldn);
    float* wg = grow(o.wg, size_t(RB) * d);
    float* bg = grow(o.bg, RB);
    for (uint32_t r0 = 0; r0 < nH; r0 += RB) {
      const uint32_t R = std::min(RB, nH - r0);
      gather_rows(L, head.data, r0, R, wg, bg, nullptr);
      nk::blk_forward(zH.data() + size_t(r0) * ldn, wg, d, bg, o.Xt.data(), R, ldn);
    }
  }
  std::vector<uint32_t> ids;
  std::vector<size_t> pOrder;
  std::vector<float> z, zw, comb, tmp;
  double scored = 0;
  for (uint32_t i = 0; i < q; ++i) {
    const uint32_t row = rowsA.data[i];
    const float* h = H.data + size_t(i) * d;
    // The candidates: this rank's head rows, then its members of the clusters one process probes.
    ids.assign(head.data, head.data + nH);
    for (uint32_t p = pOff[i]; p < pOff[i + 1]; ++p) {
      const uint32_t c = pCl[p];
      ids.insert(ids.end(), mem.data + off.data[c], mem.data + off.data[c + 1]);
    }
    const size_t m0 = ids.size();
    ids.resize(m0 + extra);
    z.resize(m0 + extra);
    for (uint32_t e = 0; e < nH; ++e) z[e] = zH[size_t(e) * ldn + i];
    for (size_t e = nH; e < m0; ++e) z[e] = L.b[ids[e]] + nk::dot(L.W + size_t(ids[e]) * d, h, d);
    size_t m = m0;
    if (L.hasWide) {
      zw.resize(m0 + extra);
      m = net::wide_candidates(L, data, row, h, ids.data(), z.data(), zw.data(), m0, extra, s);
    }
    if (apart) {
      // The proposals ids[m0..m) apart, best first (descending wide score, ties by the smaller row: the smaller
      // label, as a rank's rows ascend with its labels), with their scores at each scale (the candidates'
      // expression below).
      comb.resize(std::max<size_t>(m, 1));
      pOrder.resize(m - m0);
      std::iota(pOrder.begin(), pOrder.end(), m0);
      std::sort(pOrder.begin(), pOrder.end(), [&](size_t a, size_t b) { return zw[a] > zw[b] || (zw[a] == zw[b] && ids[a] < ids[b]); });
      const size_t np = pOrder.size();
      for (size_t t = 0; t < extra; ++t) {
        propIdx[size_t(i) * extra + t] = t < np ? ids[pOrder[t]] : UINT32_MAX;
        propVal[size_t(i) * extra + t] = t < np ? zw[pOrder[t]] : -std::numeric_limits<float>::infinity();
      }
      for (uint32_t si = 0; si < S; ++si) {
        const float x = scales[si];
        for (size_t p = m0; p < m; ++p) comb[p] = x * z[p] + zw[p];
        float* pc = propComb + (size_t(i) * S + si) * extra;
        for (size_t t = 0; t < extra; ++t) pc[t] = t < np ? comb[pOrder[t]] : -std::numeric_limits<float>::infinity();
      }
      m = m0;
    }
    scored += double(m);
    comb.resize(std::max<size_t>(m, 1));
    tmp.resize(std::max<size_t>(m, 1));
    for (uint32_t si = 0; si < S; ++si) {
      const float x = scales[si];
      for (size_t p = 0; p < m; ++p) comb[p] = x * z[p] + (L.hasWide ? zw[p] : 0.0f);
      float mx = -std::numeric_limits<float>::infinity();
      for (size_t p = 0; p < m; ++p) mx = std::max(mx, comb[p]);
      double sumExp = 0;
      if (m) {
        nk::exp_shift(tmp.data(), comb.data(), mx, static_cast<uint32_t>(m));
        for (size_t p = 0; p < m; ++p) sumExp += tmp[p];
      }
      const size_t at = (size_t(i) * S + si) * k;
      topk_row(outIdx + at, outVal + at, comb.data(), ids.data(), m, k);
      outLse[(size_t(i) * S + si) * 2] = mx;
      outLse[(size_t(i) * S + si) * 2 + 1] = sumExp;
    }
  }
  return Napi::Number::New(info.Env(), scored);
}

}  // namespace

void RegisterShard(Napi::Env env, Napi::Object exports) {
  Export<NetShardInput>(env, exports, "netShardInput");
  Export<NetShardHidden>(env, exports, "netShardHidden");
  Export<NetShardOutForward>(env, exports, "netShardOutForward");
  Export<NetShardOutBackward>(env, exports, "netShardOutBackward");
  Export<NetShardLowerBackward>(env, exports, "netShardLowerBackward");
  Export<NetShardScore>(env, exports, "netShardScore");
  Export<NetShardSampledScore>(env, exports, "netShardSampledScore");
  Export<NetShardProbe>(env, exports, "netShardProbe");
}

}  // namespace sl
