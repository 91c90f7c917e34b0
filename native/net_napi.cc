// Bindings of the network kernels (shapes: src/native/network-types.ts, math: net.h):
//   netTrainSlice(net, data, pointIds, hyper, outStats) -> undefined, or in mode 3 the sparse gradients
//   netApplyRows(net, hyper, updates)
//   netPredictSlice(net, data, pointIds, k, sampled, outIdx, outVal)
//   netKernelIsa: string constant, the instruction set of the dense block kernels
//   netWideVector(allow?) -> whether sampled prediction's wide walk uses its vector loop
// Parsing re-checks every length against the layer shapes (cheap: O(layers) property reads plus the hash
// parameter scan of lsh_napi_parse.h), so a TS bug becomes an exception, never a wild write.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "lsh_napi_parse.h"
#include "modules.h"
#include "napi_util.h"
#include "net.h"
#include "net_internal.h"
#include "net_kernels.h"
#include "net_wide.h"

namespace sl {
namespace {

constexpr uint32_t kMaxLayers = 64;

// Parsed per call into thread-local vectors (no allocation in steady state).
thread_local std::vector<NetLayer> tlLayers;
thread_local std::vector<float*> tlGradW, tlGradB;
thread_local std::vector<nk::GradRows> tlSink;

template <typename T>
Span<T> ExactArray(const Napi::Object& o, const char* key, size_t len, const char* shape) {
  Span<T> s = GetArrayProp<T>(o, key);
  if (s.size != len)
    throw ArgError(std::string(key) + " has " + std::to_string(s.size) + " elements, expected " + shape + " = " +
                   std::to_string(len));
  return s;
}

bool Present(const Napi::Value& v) { return !v.IsUndefined() && !v.IsNull(); }

// training: the Adam moments are touched too (prediction reads only W and b), see advise_huge_pages.
void ParseLayer(const Napi::Object& o, NetLayer& L, bool training) {
  L.inDim = GetU32Prop(o, "inDim");
  L.outDim = GetU32Prop(o, "outDim");
  const uint32_t act = GetU32Prop(o, "activation");
  if (act > 2) throw ArgError("activation must be 0 (relu), 1 (softmax) or 2 (linear)");
  L.act = static_cast<Activation>(act);
  const uint32_t im = GetU32Prop(o, "inputMajor");
  if (im > 1) throw ArgError("inputMajor must be 0 or 1");
  L.inputMajor = im == 1;
  L.featureDim = L.inDim;
  if (L.inputMajor && Present(o.Get("features"))) {
    L.featureDim = GetU32Prop(o, "features");
    if (L.featureDim < L.inDim) throw ArgError("features (the network's input features) must be >= inDim (the rows held)");
  }
  Napi::Value dv = o.Get("dropout");
  L.dropout = Present(dv) ? static_cast<float>(dv.ToNumber().DoubleValue()) : 0.0f;
  if (!(L.dropout >= 0.0f && L.dropout < 1.0f)) throw ArgError("dropout must be in [0, 1)");
  const size_t wlen = size_t(L.inDim) * L.outDim;
  L.W = ExactArray<float>(o, "weights", wlen, "inDim * outDim").data;
  L.b = ExactArray<float>(o, "bias", L.outDim, "outDim").data;
  // Prediction reads only W and b (and the wide part's weights): the Adam moments and step counters are
  // not parsed, so an inference-sized network (Network.load) may hold empty ones.
  if (training) {
    L.mW = ExactArray<float>(o, "mWeights", wlen, "inDim * outDim").data;
    L.vW = ExactArray<float>(o, "vWeights", wlen, "inDim * outDim").data;
    L.mb = ExactArray<float>(o, "mBias", L.outDim, "outDim").data;
    L.vb = ExactArray<float>(o, "vBias", L.outDim, "outDim").data;
    // Training updates random rows of W and its moments: huge pages spare TLB misses. Prediction does not
    // ask: a synchronous collapse of a freshly loaded model's pages costs more than one pass saves. Moments
    // marked smallPages (few of their rows are ever written) are left to 4 KiB pages.
    net::advise_huge_pages(L.W, wlen * sizeof(float));
    Napi::Value sp = o.Get("smallPages");
    if (!(Present(sp) && sp.ToBoolean().Value()))
      for (float* a : {L.mW, L.vW}) net::advise_huge_pages(a, wlen * sizeof(float));
    L.rowSteps = ExactArray<uint32_t>(o, "rowSteps", L.rows(), L.inputMajor ? "inDim" : "outDim").data;
    L.biasSteps = GetArrayProp<uint32_t>(o, "biasSteps", 1).data;
  }
  Napi::Value sv = o.Get("sampling");
  L.sampled = Present(sv);
  if (L.sampled) {
    Napi::Object so = GetObject(sv, "sampling");
    L.hash = ParseHashParams(GetObject(so.Get("hash"), "sampling.hash"));
    Napi::Object to = GetObject(so.Get("tables"), "sampling.tables");
    // Prediction: a layer whose tables are not allocated (empty ids; an inference-sized network allocates
    // them only when sampled prediction queries them) is refused by NetPredictSlice if it would be queried.
    L.hasTables = training || GetArrayProp<uint32_t>(to, "ids").size > 0;
    if (L.hasTables) L.tables = ParseTables(to);
    L.query = ParseQuery(GetObject(so.Get("query"), "sampling.query"));
    Napi::Value sf = so.Get("sharedFill");
    L.sharedFill = sf.IsUndefined() ? true : sf.ToBoolean().Value();
    Napi::Value lq = so.Get("logQ");
    if (Present(lq)) L.logQ = ExactArray<float>(so, "logQ", L.outDim, "outDim").data;
    Napi::Value iv = so.Get("index");
    if (Present(iv)) {
      Napi::Object io = GetObject(iv, "sampling.index");
      ClusterIndex& ix = L.index;
      ix.C = GetU32Prop(io, "C");
      if (ix.C > L.outDim) throw ArgError("sampling.index.C must be at most outDim");
      ix.budget = GetU32Prop(io, "budget");
      ix.centroids = ExactArray<float>(io, "centroids", size_t(ix.C) * (L.inDim + 2), "C * (inDim + 2)").data;
      ix.offsets = ExactArray<uint32_t>(io, "offsets", size_t(ix.C) + 1, "C + 1").data;
      auto mem = GetArrayProp<uint32_t>(io, "members");
      auto head = GetArrayProp<uint32_t>(io, "head");
      ix.members = mem.data;
      ix.head = head.data;
      if (head.size > L.outDim) throw ArgError("sampling.index.head is longer than outDim");
      ix.nHead = static_cast<uint32_t>(head.size);
      if (ix.offsets[0] != 0 || ix.offsets[ix.C] != mem.size) throw ArgError("sampling.index.offsets must run from 0 to members.length");
      for (uint32_t e = 0; e < ix.nHead; ++e)
        if (ix.head[e] >= L.outDim) throw ArgError("sampling.index.head holds an id >= outDim");
      for (uint32_t c = 0; c < ix.C; ++c)
        if (ix.offsets[c + 1] < ix.offsets[c]) throw ArgError("sampling.index.offsets must not decrease");
      L.hasIndex = true;
    }
    Napi::Value bn = so.Get("batchNegatives");
    L.batchNegatives = bn.IsUndefined() ? false : bn.ToBoolean().Value();
    L.wideNegatives = Present(so.Get("wideNegatives")) ? GetU32Prop(so, "wideNegatives") : 0;
  }
  Napi::Value wv = o.Get("wide");
  L.hasWide = Present(wv);
  if (L.hasWide) {
    Napi::Object wo = GetObject(wv, "wide");
    const uint32_t D = GetU32Prop(wo, "inputDim");
    auto off = ExactArray<uint32_t>(wo, "offsets", size_t(D) + 1, "inputDim + 1");
    auto lab = GetArrayProp<uint32_t>(wo, "labels");
    const size_t nnz = lab.size;
    L.wideOff = off.data;
    L.wideLab = lab.data;
    L.wideW = ExactArray<float>(wo, "weights", nnz, "labels.length").data;
    if (training) L.wideAcc = ExactArray<float>(wo, "accum", nnz, "labels.length").data;  // Adagrad sums: training only
    // The ends are checked here; monotone offsets and labels < outDim when built or loaded (O(nnz) per
    // call would cost more than the slice), and the kernels skip a label >= outDim.
    if (off.data[0] != 0 || off.data[D] != nnz) throw ArgError("wide.offsets must run from 0 to labels.length");
    L.wideD = D;
    Napi::Value bv = wo.Get("byLabel");
    if (Present(bv)) {
      Napi::Object bo = GetObject(bv, "wide.byLabel");
      auto bOff = ExactArray<uint32_t>(bo, "offsets", size_t(L.outDim) + 1, "outDim + 1");
      L.wideByFeat = ExactArray<uint32_t>(bo, "features", nnz, "labels.length").data;
      L.wideByEntry = ExactArray<uint32_t>(bo, "entries", nnz, "labels.length").data;
      if (bOff.data[0] != 0 || bOff.data[L.outDim] != nnz) throw ArgError("wide.byLabel.offsets must run from 0 to labels.length");
      L.wideByOff = bOff.data;  // the entries and features read are checked where read (net_shard.cc)
    }
  }
}

// featureSlice: layer 0 may hold the rows of only some input features (a label-sharded rank's network); only
// the netShard* phases (net_shard.cc), which take the feature -> row map, accept one.
const std::vector<NetLayer>& ParseNet(const Napi::Value& v, bool training, bool featureSlice = false) {
  Napi::Object net = GetObject(v, "net");
  Napi::Value lv = net.Get("layers");
  if (!lv.IsArray()) throw ArgError("Expected an array for net.layers");
  Napi::Array arr = lv.As<Napi::Array>();
  const uint32_t n = arr.Length();
  if (n == 0 || n > kMaxLayers)
    throw ArgError("net.layers must hold 1 to " + std::to_string(kMaxLayers) + " layers but holds " + std::to_string(n));
  std::vector<NetLayer>& layers = tlLayers;
  layers.assign(n, NetLayer());
  for (uint32_t k = 0; k < n; ++k) {
    const std::string where = "net.layers[" + std::to_string(k) + "]";
    try {
      ParseLayer(GetObject(arr.Get(k), "layer"), layers[k], training);
    } catch (const ArgError& e) {
      throw ArgError(where + ": " + e.what());
    }
  }
  net_check_layers(layers.data(), n);
  if (!featureSlice && layers[0].featureDim != layers[0].inDim)
    throw ArgError("net.layers[0] holds the rows of " + std::to_string(layers[0].inDim) + " of " + std::to_string(layers[0].featureDim) +
                   " input features (a label-sharded rank's network): only the netShard* phases take it");
  return layers;
}

CsrView ParseData(const Napi::Value& v, bool labels) {
  Napi::Object o = GetObject(v, "data");
  CsrView d;
  try {
    d.points = GetU32Prop(o, "points");
    d.offsets = GetArrayProp<uint32_t>(o, "offsets", size_t(d.points) + 1).data;
    auto idx = GetArrayProp<uint32_t>(o, "indices");
    auto val = GetArrayProp<float>(o, "values");
    d.indices = idx.data;
    d.values = val.data;
    d.nnz = std::min(idx.size, val.size);
    if (labels) {
      d.labelOffsets = GetArrayProp<uint32_t>(o, "labelOffsets", size_t(d.points) + 1).data;
      auto li = GetArrayProp<uint32_t>(o, "labelIndices");
      d.labelIndices = li.data;
      d.nLabels = li.size;
    }
  } catch (const ArgError& e) {
    throw ArgError(std::string("data: ") + e.what());
  }
  return d;
}

// The rows of a call: a Uint32Array, or every point of the data when v is absent (null or undefined; `all`
// then holds them). rows/n point at them.
void ParseRows(const Napi::Value& v, uint32_t points, std::vector<uint32_t>& all, const uint32_t*& rows, size_t& n) {
  if (Present(v)) {
    auto r = GetArray<uint32_t>(v, "rows");
    rows = r.data, n = r.size;
  } else {
    all.resize(points);
    for (uint32_t i = 0; i < points; ++i) all[i] = i;
    rows = all.data(), n = all.size();
  }
  if (n > 0xFFFFFFFFu) throw ArgError("rows is too long");
}

float FiniteProp(const Napi::Object& o, const char* key) {
  const double x = GetF64Prop(o, key);
  if (!std::isfinite(x)) throw ArgError(std::string("hyper.") + key + " must be finite");
  return static_cast<float>(x);
}

void ParseAdam(const Napi::Object& o, TrainHyper& h) {
  h.lr = FiniteProp(o, "lr");
  h.beta1 = FiniteProp(o, "beta1");
  h.beta2 = FiniteProp(o, "beta2");
  h.eps = FiniteProp(o, "eps");
  if (!(h.lr >= 0)) throw ArgError("hyper.lr must be >= 0");
  if (!(h.beta1 >= 0 && h.beta1 < 1) || !(h.beta2 >= 0 && h.beta2 < 1))
    throw ArgError("hyper.beta1 and hyper.beta2 must be in [0, 1)");
  if (!(h.eps > 0)) throw ArgError("hyper.eps must be > 0");
}

// hyper.wideLr (mode 0, an output layer with a wide part).
void ParseWideLr(const Napi::Object& o, TrainHyper& h) {
  if (!Present(o.Get("wideLr"))) throw ArgError("hyper.wideLr is required in mode 0 when the output layer has a wide part");
  h.wideLr = FiniteProp(o, "wideLr");
  if (!(h.wideLr >= 0)) throw ArgError("hyper.wideLr must be >= 0");
}

TrainHyper ParseHyper(const Napi::Value& v, const std::vector<NetLayer>& layers) {
  Napi::Object o = GetObject(v, "hyper");
  TrainHyper h;
  h.mode = GetU32Prop(o, "mode");
  if (h.mode > 3) throw ArgError("hyper.mode must be 0 (adam), 1 (gradient), 2 (loss only) or 3 (sparse gradient)");
  h.seed = GetU32Prop(o, "seed");
  if (Present(o.Get("fillSeed"))) {
    h.fillSeed = GetU32Prop(o, "fillSeed");
    h.hasFillSeed = true;
  }
  h.gradScale = Present(o.Get("gradScale")) ? FiniteProp(o, "gradScale") : 1.0f;
  if (Present(o.Get("threads"))) {
    h.threads = GetU32Prop(o, "threads");
    if (h.threads < 1 || h.threads > 256) throw ArgError("hyper.threads must be in [1, 256]");
  }
  if (h.mode == 3) h.threads = 1;
  if (h.mode == 0) ParseAdam(o, h);
  if (h.mode == 0 && layers.back().hasWide) ParseWideLr(o, h);
  if (h.mode == 3) {
    if (tlSink.size() < layers.size()) tlSink.resize(layers.size());
    h.sink = tlSink.data();
  }
  if (h.mode == 1) {
    Napi::Value gv = o.Get("grads");
    if (!gv.IsArray()) throw ArgError("hyper.grads must be an array (one { weights, bias } per layer) in mode 1");
    Napi::Array ga = gv.As<Napi::Array>();
    if (ga.Length() != layers.size())
      throw ArgError("hyper.grads has " + std::to_string(ga.Length()) + " entries, expected one per layer (" +
                     std::to_string(layers.size()) + ")");
    tlGradW.assign(layers.size(), nullptr);
    tlGradB.assign(layers.size(), nullptr);
    for (uint32_t k = 0; k < layers.size(); ++k) {
      try {
        Napi::Object g = GetObject(ga.Get(k), "grads entry");
        tlGradW[k] = ExactArray<float>(g, "weights", size_t(layers[k].inDim) * layers[k].outDim, "inDim * outDim").data;
        tlGradB[k] = ExactArray<float>(g, "bias", layers[k].outDim, "outDim").data;
      } catch (const ArgError& e) {
        throw ArgError("hyper.grads[" + std::to_string(k) + "]: " + e.what());
      }
    }
    h.gradW = tlGradW.data();
    h.gradB = tlGradB.data();
    const NetLayer& last = layers.back();
    if (last.hasWide) {
      Napi::Value wv = o.Get("gradWide");
      if (!Present(wv)) throw ArgError("hyper.gradWide is required in mode 1 when the output layer has a wide part");
      auto gw = GetArray<float>(wv, "hyper.gradWide");
      if (gw.size != size_t(last.wideOff[last.wideD]))
        throw ArgError("hyper.gradWide has " + std::to_string(gw.size) + " elements, expected the wide part's " +
                       std::to_string(last.wideOff[last.wideD]));
      h.gradWide = gw.data;
    }
  }
  if (h.mode == 3 && layers.back().hasWide)
    throw ArgError("hyper.mode 3 (sparse gradients) does not support an output layer with a wide part");
  return h;
}

// netTrainSlice(net, data, pointIds: Uint32Array, hyper, outStats: Float64Array(4))
Napi::Value NetTrainSlice(const Napi::CallbackInfo& info) {
  const std::vector<NetLayer>& layers = ParseNet(info[0], true);
  const CsrView data = ParseData(info[1], true);
  auto pointIds = GetArray<uint32_t>(info[2], "pointIds");
  const TrainHyper h = ParseHyper(info[3], layers);
  auto stats = GetArray<double>(info[4], "outStats", kNumTrainStats);
  if (pointIds.size > 0xFFFFFFFFu) throw ArgError("pointIds is too long");
  net_train_slice(stats.data, layers.data(), static_cast<uint32_t>(layers.size()), data, pointIds.data,
                  static_cast<uint32_t>(pointIds.size), h);
  if (h.mode != 3) return info.Env().Undefined();
  // Mode 3: one { ids, rows, rowBias | null, biasVector | null } per layer, copied into fresh typed arrays.
  Napi::Env env = info.Env();
  Napi::Array out = Napi::Array::New(env, layers.size());
  for (uint32_t k = 0; k < layers.size(); ++k) {
    const nk::GradRows& g = tlSink[k];
    Napi::Object o = Napi::Object::New(env);
    o.Set("ids", CopyToTypedArray(env, g.ids));
    o.Set("rows", CopyToTypedArray(env, g.rows));
    if (layers[k].inputMajor) {
      o.Set("rowBias", env.Null());
      if (g.hasBiasVector) o.Set("biasVector", CopyToTypedArray(env, g.biasVector));
      else o.Set("biasVector", env.Null());
    } else {
      o.Set("rowBias", CopyToTypedArray(env, g.rowBias));
      o.Set("biasVector", env.Null());
    }
    out.Set(k, o);
  }
  return out;
}

// netApplyRows(net, hyper { lr, beta1, beta2, eps }, updates: { layer, ids, rows, rowBias?, biasVector? }[])
Napi::Value NetApplyRows(const Napi::CallbackInfo& info) {
  const std::vector<NetLayer>& layers = ParseNet(info[0], true);
  TrainHyper h;
  ParseAdam(GetObject(info[1], "hyper"), h);
  if (!info[2].IsArray()) throw ArgError("Expected an array for updates");
  Napi::Array arr = info[2].As<Napi::Array>();
  std::vector<RowGrads> c(arr.Length());
  for (uint32_t q = 0; q < arr.Length(); ++q) {
    const std::string where = "updates[" + std::to_string(q) + "]";
    try {
      Napi::Object o = GetObject(arr.Get(q), "update");
      RowGrads& g = c[q];
      g.layer = GetU32Prop(o, "layer");
      if (g.layer >= layers.size()) throw ArgError("layer must be < " + std::to_string(layers.size()));
      const NetLayer& L = layers[g.layer];
      auto ids = GetArrayProp<uint32_t>(o, "ids");
      if (ids.size > 0xFFFFFFFFu) throw ArgError("ids is too long");
      g.ids = ids.data;
      g.n = static_cast<uint32_t>(ids.size);
      g.rows = ExactArray<float>(o, "rows", size_t(g.n) * L.width(), "ids.length * row width").data;
      if (Present(o.Get("rowBias"))) g.rowBias = ExactArray<float>(o, "rowBias", g.n, "ids.length").data;
      if (Present(o.Get("biasVector"))) g.biasVector = ExactArray<float>(o, "biasVector", L.outDim, "outDim").data;
    } catch (const ArgError& e) {
      throw ArgError(where + ": " + e.what());
    }
  }
  net_apply_rows(layers.data(), static_cast<uint32_t>(layers.size()), c.data(), static_cast<uint32_t>(c.size()), h);
  return info.Env().Undefined();
}

// netPredictSlice(net, data, pointIds: Uint32Array, k, sampled: 0 | 1, outIdx: Uint32Array (n, S, k),
//                 outVal: Float32Array (n, S, k), scales?: Float32Array (S) of finite values, S in [1, 64],
//                 threads?: 1..256 (exact prediction's sample ranges; default 1))
Napi::Value NetPredictSlice(const Napi::CallbackInfo& info) {
  const std::vector<NetLayer>& layers = ParseNet(info[0], false);
  const CsrView data = ParseData(info[1], false);
  auto pointIds = GetArray<uint32_t>(info[2], "pointIds");
  const uint32_t k = GetU32(info[3], "k");
  if (k == 0) throw ArgError("k must be positive");
  const uint32_t sampled = GetU32(info[4], "sampled");
  if (sampled > 1) throw ArgError("sampled must be 0 (exact) or 1 (LSH candidates)");
  const size_t n = pointIds.size;
  const float* scales = nullptr;
  uint32_t S = 1;
  if (info.Length() > 7 && Present(info[7])) {
    auto sc = GetArray<float>(info[7], "scales");
    if (sc.size < 1 || sc.size > 64) throw ArgError("scales must hold 1 to 64 values");
    for (size_t e = 0; e < sc.size; ++e)
      if (!std::isfinite(sc.data[e])) throw ArgError("scales[" + std::to_string(e) + "] is not finite");
    scales = sc.data;
    S = static_cast<uint32_t>(sc.size);
  }
  auto outIdx = GetArray<uint32_t>(info[5], "outIdx", n * S * k);
  auto outVal = GetArray<float>(info[6], "outVal", n * S * k);
  if (n > 0xFFFFFFFFu) throw ArgError("pointIds is too long");
  // Sampled prediction queries the tables of every sampled layer but an output layer with a cluster index.
  if (sampled == 1)
    for (size_t k = 0; k < layers.size(); ++k)
      if (layers[k].sampled && !layers[k].hasTables && !(k + 1 == layers.size() && layers[k].hasIndex))
        throw ArgError("net.layers[" + std::to_string(k) + "]: sampled prediction needs its hash tables, which are not allocated");
  uint32_t threads = 1;
  if (info.Length() > 8 && Present(info[8])) {
    threads = GetU32(info[8], "threads");
    if (threads < 1 || threads > 256) throw ArgError("threads must be in [1, 256]");
  }
  const double scored = net_predict_slice(outIdx.data, outVal.data, layers.data(), static_cast<uint32_t>(layers.size()),
                                          data, pointIds.data, static_cast<uint32_t>(n), k, sampled == 1, scales, S, threads);
  return Napi::Number::New(info.Env(), scored);
}

// netClusterBuild(weights: Float32Array (N, d), bias: Float32Array (N), d, rows: Uint32Array (M), C, iters, sample, seed,
//                 outCentroids: Float32Array (C, d + 2), outOffsets: Uint32Array (C + 1), outMembers: Uint32Array (M),
//                 threads?: number (default 1))
Napi::Value NetClusterBuild(const Napi::CallbackInfo& info) {
  auto W = GetArray<float>(info[0], "weights");
  auto b = GetArray<float>(info[1], "bias");
  const uint32_t d = GetU32(info[2], "d");
  auto rows = GetArray<uint32_t>(info[3], "rows");
  const uint32_t C = GetU32(info[4], "C");
  const uint32_t iters = GetU32(info[5], "iters");
  const uint32_t sample = GetU32(info[6], "sample");
  const uint32_t seed = GetU32(info[7], "seed");
  if (d == 0) throw ArgError("d must be positive");
  if (b.size > 0xFFFFFFFFu) throw ArgError("bias is too long");
  const uint32_t N = static_cast<uint32_t>(b.size);
  if (W.size != size_t(N) * d) throw ArgError("weights has " + std::to_string(W.size) + " elements, expected N * d = " + std::to_string(size_t(N) * d));
  if (rows.size > N) throw ArgError("rows is longer than bias");
  const uint32_t M = static_cast<uint32_t>(rows.size);
  auto cent = GetArray<float>(info[8], "outCentroids", size_t(C) * (d + 2));
  auto off = GetArray<uint32_t>(info[9], "outOffsets", size_t(C) + 1);
  auto mem = GetArray<uint32_t>(info[10], "outMembers", M);
  const uint32_t threads = info.Length() > 11 && !info[11].IsUndefined() ? GetU32(info[11], "threads") : 1;
  if (threads == 0 || threads > 256) throw ArgError("threads must be in [1, 256] but is " + std::to_string(threads));
  cluster_build(cent.data, off.data, mem.data, W.data, b.data, N, d, rows.data, M, C, iters, sample, seed, threads);
  return info.Env().Undefined();
}

// The layer (W (N, d), b (N)) and row ids (each < N) of netClusterNorms / netClusterAssign, checked.
struct ClusterRows {
  Span<float> W, b;
  Span<uint32_t> ids;
  uint32_t d = 0, N = 0, n = 0;
};
ClusterRows parse_cluster_rows(const Napi::CallbackInfo& info) {
  ClusterRows r{GetArray<float>(info[0], "weights"), GetArray<float>(info[1], "bias"), GetArray<uint32_t>(info[3], "ids")};
  r.d = GetU32(info[2], "d");
  if (r.d == 0) throw ArgError("d must be positive");
  if (r.b.size > 0xFFFFFFFFu || r.ids.size > 0xFFFFFFFFu) throw ArgError("bias or ids is too long");
  r.N = static_cast<uint32_t>(r.b.size);
  r.n = static_cast<uint32_t>(r.ids.size);
  if (r.W.size != size_t(r.N) * r.d) throw ArgError("weights has " + std::to_string(r.W.size) + " elements, expected N * d = " + std::to_string(size_t(r.N) * r.d));
  for (uint32_t s = 0; s < r.n; ++s)
    if (r.ids.data[s] >= r.N) throw ArgError("ids[" + std::to_string(s) + "] = " + std::to_string(r.ids.data[s]) + " is not a row (< " + std::to_string(r.N) + ")");
  return r;
}

// netClusterNorms(weights (N, d), bias (N), d, ids (n), out: Float64Array (n)): |[w, b]|^2 of each row (cluster_norms).
Napi::Value NetClusterNorms(const Napi::CallbackInfo& info) {
  const ClusterRows r = parse_cluster_rows(info);
  auto out = GetArray<double>(info[4], "out", r.n);
  cluster_norms(out.data, r.W.data, r.b.data, r.d, r.ids.data, r.n);
  return info.Env().Undefined();
}

// netClusterTransform(weights (N, d), bias (N), d, ids (n), norm2: Float64Array (N, by row), invM, out: Float32Array (n, d + 2))
Napi::Value NetClusterTransform(const Napi::CallbackInfo& info) {
  const ClusterRows r = parse_cluster_rows(info);
  auto norm2 = GetArray<double>(info[4], "norm2", r.N);
  const double invM = GetF64(info[5], "invM");
  if (!(invM > 0) || !std::isfinite(invM)) throw ArgError("invM must be positive and finite");
  auto out = GetArray<float>(info[6], "out", size_t(r.n) * (r.d + 2));
  cluster_transform(out.data, r.W.data, r.b.data, r.d, r.ids.data, r.n, norm2.data, invM);
  return info.Env().Undefined();
}

// netClusterAssign(weights (N, d), bias (N), d, ids (n), norm2: Float64Array (N, by row), invM, centroids (C, d + 2),
//                  outBest: Uint32Array (n), sums: Float64Array (C, d + 2) | null, counts: Float64Array (C) | null)
// (cluster_assign: the nearest centre of each row, and with sums and counts their running sums.)
Napi::Value NetClusterAssign(const Napi::CallbackInfo& info) {
  const ClusterRows r = parse_cluster_rows(info);
  auto norm2 = GetArray<double>(info[4], "norm2", r.N);
  const double invM = GetF64(info[5], "invM");
  if (!(invM > 0) || !std::isfinite(invM)) throw ArgError("invM must be positive and finite");
  auto cent = GetArray<float>(info[6], "centroids");
  const uint32_t w = r.d + 2;
  if (cent.size == 0 || cent.size % w != 0 || cent.size / w > 0xFFFFFFFFu) throw ArgError("centroids must hold C > 0 rows of d + 2");
  const uint32_t C = static_cast<uint32_t>(cent.size / w);
  auto best = GetArray<uint32_t>(info[7], "outBest", r.n);
  double* sums = nullptr;
  double* counts = nullptr;
  if (Present(info[8]) || Present(info[9])) {
    sums = GetArray<double>(info[8], "sums", size_t(C) * w).data;
    counts = GetArray<double>(info[9], "counts", C).data;
  }
  cluster_assign(best.data, sums, counts, r.W.data, r.b.data, r.d, r.ids.data, r.n, norm2.data, invM, cent.data, C);
  return info.Env().Undefined();
}

// netWideBuild(data, rows: Uint32Array | null, inputDim, labels, maxPerLabel, init, minShare, slice: Uint32Array | null[,
//   threads = 1])
//   -> { offsets: Uint32Array (inputDim + 1), labels: Uint32Array (nnz), weights: Float32Array (nnz) }
// The wide part's pairs (net_wide.h wide_build), in fresh arrays: their count is known only at the end.
Napi::Value NetWideBuild(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const CsrView data = ParseData(info[0], true);
  std::vector<uint32_t> all;
  const uint32_t* rows = nullptr;
  size_t n = 0;
  ParseRows(info[1], data.points, all, rows, n);
  const uint32_t inputDim = GetU32(info[2], "inputDim");
  const uint32_t labels = GetU32(info[3], "labels");
  const uint32_t maxPerLabel = GetU32(info[4], "maxPerLabel");
  const double init = GetF64(info[5], "init");
  const double minShare = GetF64(info[6], "minShare");
  if (inputDim == 0 || inputDim == 0xFFFFFFFFu) throw ArgError("inputDim must be in [1, 2^32 - 2]");
  if (maxPerLabel == 0) throw ArgError("maxPerLabel must be positive");
  if (!std::isfinite(init)) throw ArgError("init must be finite");
  if (!(minShare >= 0 && minShare < 1)) throw ArgError("minShare must be in [0, 1)");
  const uint32_t* slice = nullptr;
  size_t nSlice = 0;
  if (Present(info[7])) {
    auto sl = GetArray<uint32_t>(info[7], "slice");
    slice = sl.data, nSlice = sl.size;
    if (nSlice > labels) throw ArgError("slice is longer than labels");
  }
  const uint32_t threads = Present(info[8]) ? GetU32(info[8], "threads") : 1;
  if (threads == 0 || threads > 1024) throw ArgError("threads must be in [1, 1024]");
  net::WideBuilt w;
  net::wide_build(w, data, rows, static_cast<uint32_t>(n), inputDim, labels, maxPerLabel, init, minShare, slice,
                  static_cast<uint32_t>(nSlice), threads);
  Napi::Object o = Napi::Object::New(env);
  o.Set("offsets", CopyToTypedArray(env, w.offsets));
  o.Set("labels", CopyToTypedArray(env, w.labels));
  o.Set("weights", CopyToTypedArray(env, w.weights));
  return o;
}

// netPrefault(net) -> bytes: maps every page of the training state (weights, Adam moments, step counters, the
// wide part's Adagrad sums) now, after the huge-page advice that training's first call gives (ParseLayer): a
// fresh network's moments are otherwise first touched, page by page, during its first steps. Layer 0 may be a
// feature slice (a label-sharded rank's network). Not concurrently with training on the same arrays.
// netAdviseHugePages(a[, huge = true]): the huge-page advice of a training array, given before anything writes it (see
// advise_huge_pages): its pages are then faulted in as huge pages, where advice given after the first writes
// has the kernel copy every written page into new huge pages (MADV_COLLAPSE).
Napi::Value NetAdviseHugePages(const Napi::CallbackInfo& info) {
  const Span<float> a = GetArray<float>(info[0], "array");
  // netAdviseHugePages(a, false): the 4 KiB pages of advise_small_pages instead.
  if (info.Length() > 1 && !info[1].IsUndefined() && !info[1].ToBoolean().Value()) net::advise_small_pages(a.data, a.size * sizeof(float));
  else net::advise_huge_pages(a.data, a.size * sizeof(float));
  return info.Env().Undefined();
}

// netReleasePages(a): zeroes a Float32Array or Uint32Array and gives its whole pages back to the kernel
// (release_pages); returns the bytes given back.
Napi::Value NetReleasePages(const Napi::CallbackInfo& info) {
  void* p;
  size_t bytes;
  if (info[0].IsTypedArray() && info[0].As<Napi::TypedArray>().TypedArrayType() == napi_uint32_array) {
    const Span<uint32_t> a = GetArray<uint32_t>(info[0], "array");
    p = a.data, bytes = a.size * sizeof(uint32_t);
  } else {
    const Span<float> a = GetArray<float>(info[0], "array");
    p = a.data, bytes = a.size * sizeof(float);
  }
  return Napi::Number::New(info.Env(), double(net::release_pages(p, bytes)));
}

// netGlorotFill(a, state, limit): a[i] = float((2 u_i - 1) limit), u_i = r_i / 2^32 with r_i the i-th output of
// xoshiro128** from state (4 words, as src/util/rng.ts's Xoshiro128 holds them), the same numbers as that class's
// loop in src/network/state.ts (the same double operations in the same order, then one rounding to float) at
// a fraction of its time (27 million weights of debian-tags' first layer: 0.17 s in JavaScript).
// netGlorotFill(a, state, limit, rows?, width?): with `rows` (increasing u32 row ids) and `width`, row e of `a`
// (width floats) gets row rows[e] of that stream, the other rows' numbers drawn and skipped: the rows of a
// network whose layer 0 holds only some of its input features (src/network/input-map.ts), as the whole
// layer's draw would give them.
Napi::Value NetGlorotFill(const Napi::CallbackInfo& info) {
  const Span<float> a = GetArray<float>(info[0], "array");
  const Span<uint32_t> st = GetArray<uint32_t>(info[1], "state");
  if (st.size != 4) throw ArgError("state must hold 4 words");
  const double limit = info[2].As<Napi::Number>().DoubleValue();
  if (!std::isfinite(limit)) throw ArgError("limit must be finite");
  Span<uint32_t> rows{nullptr, 0};
  size_t width = a.size;
  if (info.Length() > 3 && !info[3].IsUndefined()) {
    rows = GetArray<uint32_t>(info[3], "rows");
    const double w = info[4].As<Napi::Number>().DoubleValue();
    if (!(w >= 1 && w == std::floor(w)) || double(rows.size) * w != double(a.size)) throw ArgError("rows x width must be the array's length");
    width = size_t(w);
    for (size_t e = 1; e < rows.size; ++e) {
      if (rows.data[e] <= rows.data[e - 1]) throw ArgError("rows must be increasing");
    }
  }
  uint32_t s0 = st.data[0], s1 = st.data[1], s2 = st.data[2], s3 = st.data[3];
  auto rotl = [](uint32_t x, int k) { return (x << k) | (x >> (32 - k)); };
  auto next = [&]() {
    const uint32_t r = rotl(s1 * 5u, 7) * 9u;
    const uint32_t t = s1 << 9;
    s2 ^= s0;
    s3 ^= s1;
    s1 ^= s2;
    s0 ^= s3;
    s2 ^= t;
    s3 = rotl(s3, 11);
    return r;
  };
  auto fill = [&](float* to, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      const double u = double(next()) / 4294967296.0;
      to[i] = static_cast<float>((2.0 * u - 1.0) * limit);
    }
  };
  if (rows.data == nullptr) {
    fill(a.data, a.size);
    return info.Env().Undefined();
  }
  uint64_t at = 0;  // the stream's row
  for (size_t e = 0; e < rows.size; ++e) {
    for (; at < rows.data[e]; ++at) {
      for (size_t i = 0; i < width; ++i) next();
    }
    fill(a.data + e * width, width);
    ++at;
  }
  return info.Env().Undefined();
}

Napi::Value NetPrefault(const Napi::CallbackInfo& info) {
  const std::vector<NetLayer>& layers = ParseNet(info[0], true, true);
  double bytes = 0;
  for (const NetLayer& L : layers) {
    const size_t w = size_t(L.inDim) * L.outDim;
    for (float* a : {L.W, L.mW, L.vW}) bytes += double(net::populate(a, w * sizeof(float)));
    for (float* a : {L.b, L.mb, L.vb}) bytes += double(net::populate(a, size_t(L.outDim) * sizeof(float)));
    bytes += double(net::populate(L.rowSteps, size_t(L.rows()) * sizeof(uint32_t)));
    if (L.hasWide) {
      const size_t nnz = L.wideOff[L.wideD];
      bytes += double(net::populate(L.wideW, nnz * sizeof(float)));
      bytes += double(net::populate(L.wideAcc, nnz * sizeof(float)));
    }
  }
  return Napi::Number::New(info.Env(), bytes);
}

}  // namespace

// For the bindings of other files (net_shard.cc): the parsers above (a feature slice of layer 0 accepted).
const std::vector<NetLayer>& net_parse_layers(const Napi::Value& v, bool training) { return ParseNet(v, training, true); }
CsrView net_parse_data(const Napi::Value& v, bool labels) { return ParseData(v, labels); }
void net_parse_rows(const Napi::Value& v, uint32_t points, std::vector<uint32_t>& all, const uint32_t*& rows, size_t& n) {
  ParseRows(v, points, all, rows, n);
}
void net_parse_adam(const Napi::Object& o, TrainHyper& h) { ParseAdam(o, h); }
void net_parse_wide_lr(const Napi::Object& o, TrainHyper& h) { ParseWideLr(o, h); }

// netWideVector(allow?: boolean): whether sampled prediction's wide walk may use its vector loop (default and
// when absent: yes, where the CPU allows); returns whether it now does. Tests compare both loops.
Napi::Value NetWideVector(const Napi::CallbackInfo& info) {
  bool allow = true;
  if (info.Length() > 0 && !info[0].IsUndefined()) {
    if (!info[0].IsBoolean()) throw ArgError("allow must be a boolean");
    allow = info[0].As<Napi::Boolean>().Value();
  }
  return Napi::Boolean::New(info.Env(), net::wide_walk_vector(allow));
}

void RegisterNetwork(Napi::Env env, Napi::Object exports) {
  Export<NetTrainSlice>(env, exports, "netTrainSlice");
  Export<NetApplyRows>(env, exports, "netApplyRows");
  Export<NetPredictSlice>(env, exports, "netPredictSlice");
  Export<NetClusterBuild>(env, exports, "netClusterBuild");
  Export<NetClusterNorms>(env, exports, "netClusterNorms");
  Export<NetClusterAssign>(env, exports, "netClusterAssign");
  Export<NetClusterTransform>(env, exports, "netClusterTransform");
  Export<NetWideBuild>(env, exports, "netWideBuild");
  Export<NetPrefault>(env, exports, "netPrefault");
  Export<NetAdviseHugePages>(env, exports, "netAdviseHugePages");
  Export<NetGlorotFill>(env, exports, "netGlorotFill");
  Export<NetReleasePages>(env, exports, "netReleasePages");
  Export<NetWideVector>(env, exports, "netWideVector");
  // Instruction set of the dense block kernels chosen for this CPU (a constant, not a function).
  exports.Set("netKernelIsa", Napi::String::New(env, nk::block_isa()));
}

}  // namespace sl
