// net_apply_rows: lazy Adam on gradient rows computed elsewhere (training mode 3 on other slices, threads or
// processes). Data-parallel training hands every replica the same list of contributions; summing them id by
// id in list order and stepping each distinct row once gives every replica the same weights, and with one
// contribution the result is exactly what mode 0 would have written (same gradient, same per-row step count,
// same Adam kernel).
#include <algorithm>
#include <string>
#include <vector>

#include "napi_util.h"
#include "net_internal.h"

namespace sl {
namespace {

struct ApplyScratch {
  std::vector<int32_t> slotOf;  // row -> slot of the layer being applied; -1 when unused (reset after use)
  std::vector<uint32_t> slotRow;
  std::vector<float> acc, accBias, biasVec;
};

thread_local ApplyScratch tlApply;

}  // namespace

void net_apply_rows(const NetLayer* layers, uint32_t nLayers, const RowGrads* c, uint32_t nc, const TrainHyper& h) {
  // Check everything first: a bad id must not leave some rows updated.
  for (uint32_t q = 0; q < nc; ++q) {
    const RowGrads& g = c[q];
    const std::string where = "updates[" + std::to_string(q) + "]";
    if (g.layer >= nLayers) throw ArgError(where + ".layer must be < " + std::to_string(nLayers));
    const NetLayer& L = layers[g.layer];
    const uint32_t rows = L.rows();
    if (g.n > 0 && (!g.ids || !g.rows)) throw ArgError(where + " has no ids or rows");
    for (uint32_t e = 0; e < g.n; ++e)
      if (g.ids[e] >= rows)
        throw ArgError(where + ".ids[" + std::to_string(e) + "] = " + std::to_string(g.ids[e]) + " is not a row of layer " +
                       std::to_string(g.layer) + " (" + std::to_string(rows) + " rows)");
    if (!L.inputMajor && g.n > 0 && !g.rowBias) throw ArgError(where + ": a neuron-major layer needs rowBias");
    if (L.inputMajor && g.rowBias) throw ArgError(where + ": an input-major layer takes biasVector, not rowBias");
    if (!L.inputMajor && g.biasVector) throw ArgError(where + ": a neuron-major layer takes rowBias, not biasVector");
  }
  net::FtzScope ftz;
  ApplyScratch& s = tlApply;
  const nk::AdamStep base{h.lr, h.beta1, h.beta2, h.eps, 1, 1};
  for (uint32_t k = 0; k < nLayers; ++k) {
    const NetLayer& L = layers[k];
    const uint32_t width = L.width();
    if (s.slotOf.size() < L.rows()) s.slotOf.resize(L.rows(), -1);
    s.slotRow.clear();
    bool anyBias = false;
    for (uint32_t q = 0; q < nc; ++q) {
      const RowGrads& g = c[q];
      if (g.layer != k) continue;
      if (g.biasVector) {
        if (!anyBias) s.biasVec.assign(g.biasVector, g.biasVector + L.outDim);
        else nk::add(s.biasVec.data(), g.biasVector, L.outDim);
        anyBias = true;
      }
      for (uint32_t e = 0; e < g.n; ++e) {
        const uint32_t j = g.ids[e];
        const float* row = g.rows + size_t(e) * width;
        int32_t slot = s.slotOf[j];
        if (slot < 0) {
          slot = static_cast<int32_t>(s.slotRow.size());
          s.slotOf[j] = slot;
          s.slotRow.push_back(j);
          s.acc.resize(size_t(slot + 1) * width);
          s.accBias.resize(size_t(slot) + 1);
          std::copy(row, row + width, s.acc.begin() + size_t(slot) * width);
          s.accBias[slot] = g.rowBias ? g.rowBias[e] : 0.0f;
        } else {
          nk::add(s.acc.data() + size_t(slot) * width, row, width);
          if (g.rowBias) s.accBias[slot] += g.rowBias[e];
        }
      }
    }
    nk::AdamCorrection corr;
    corr.init(h.beta1, h.beta2);
    constexpr size_t kAhead = 4;  // rows are scattered over arrays of hundreds of MB: fetch ahead
    const size_t bytesPerRow = sizeof(float) * width;
    for (size_t t = 0; t < s.slotRow.size(); ++t) {
      if (t + kAhead < s.slotRow.size()) {
        const size_t on = size_t(s.slotRow[t + kAhead]) * width;
        for (size_t b = 0; b < bytesPerRow; b += 64) {
          __builtin_prefetch(reinterpret_cast<const char*>(L.W + on) + b, 1, 3);
          __builtin_prefetch(reinterpret_cast<const char*>(L.mW + on) + b, 1, 3);
          __builtin_prefetch(reinterpret_cast<const char*>(L.vW + on) + b, 1, 3);
        }
      }
      const uint32_t j = s.slotRow[t];
      s.slotOf[j] = -1;
      corr.at(nk::bump_step(L.rowSteps + j));
      nk::AdamStep a = base;
      a.ibc1 = corr.ibc1;
      a.ibc2 = corr.ibc2;
      const size_t o = size_t(j) * width;
      nk::adam_row(L.W + o, L.mW + o, L.vW + o, s.acc.data() + t * width, width, a);
      if (!L.inputMajor) nk::adam_row(L.b + j, L.mb + j, L.vb + j, s.accBias.data() + t, 1, a);
    }
    if (anyBias) {
      corr.at(nk::bump_step(L.biasSteps));
      nk::AdamStep a = base;
      a.ibc1 = corr.ibc1;
      a.ibc2 = corr.ibc2;
      nk::adam_row(L.b, L.mb, L.vb, s.biasVec.data(), L.outDim, a);
    }
  }
}

}  // namespace sl
