// The wide part's terms of a slice, sorted by label, and the choice of its pairs (net_wide.h).
#include "net_wide.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>

#include "napi_util.h"
#include "net_parallel.h"

namespace sl {
namespace net {

void wide_sort_by_label(std::vector<WideTerm>& t) {
  std::stable_sort(t.begin(), t.end(), [](const WideTerm& a, const WideTerm& b) {
    return a.label != b.label ? a.label < b.label : a.sample < b.sample;
  });
}

void wide_build(WideBuilt& out, const CsrView& data, const uint32_t* rows, uint32_t n, uint32_t inputDim,
                uint32_t numLabels, uint32_t maxPerLabel, double init, double minShare, const uint32_t* slice,
                uint32_t nSlice, uint32_t threads) {
  for (uint32_t e = 0; slice && e < nSlice; ++e)
    if (slice[e] >= numLabels || (e > 0 && slice[e] <= slice[e - 1]))
      throw ArgError("slice[" + std::to_string(e) + "] = " + std::to_string(slice[e]) + " is not an ascending label id < " + std::to_string(numLabels));
  // check_slice's checks but the label order: probe data with folded ids (src/train/calibrate.ts) may repeat
  // a label within a point, which then counts twice, as in the reference.
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t r = rows[i];
    if (r >= data.points)
      throw ArgError("rows[" + std::to_string(i) + "] = " + std::to_string(r) + " is out of range (the dataset has " + std::to_string(data.points) + " points)");
    if (data.offsets[r + 1] < data.offsets[r] || data.offsets[r + 1] > data.nnz || data.labelOffsets[r + 1] < data.labelOffsets[r] ||
        data.labelOffsets[r + 1] > data.nLabels)
      throw ArgError("data.offsets or data.labelOffsets of point " + std::to_string(r) + " are corrupt");
    for (uint32_t q = data.offsets[r]; q < data.offsets[r + 1]; ++q)
      if (data.indices[q] >= inputDim)
        throw ArgError("feature id " + std::to_string(data.indices[q]) + " of point " + std::to_string(r) + " is >= inputDim " + std::to_string(inputDim));
    for (uint32_t q = data.labelOffsets[r]; q < data.labelOffsets[r + 1]; ++q)
      if (data.labelIndices[q] >= numLabels)
        throw ArgError("label id " + std::to_string(data.labelIndices[q]) + " of point " + std::to_string(r) + " is >= labels " + std::to_string(numLabels));
  }
  // Points of each label (counting sort, in the order of rows).
  std::vector<uint32_t> lOff(size_t(numLabels) + 1, 0);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t q = data.labelOffsets[rows[i]], q1 = data.labelOffsets[rows[i] + 1]; q < q1; ++q) ++lOff[data.labelIndices[q] + 1];
  for (uint32_t j = 0; j < numLabels; ++j) lOff[j + 1] += lOff[j];
  std::vector<uint32_t> lPts(lOff[numLabels]);
  {
    std::vector<uint32_t> cur(lOff.begin(), lOff.end() - 1);
    for (uint32_t i = 0; i < n; ++i)
      for (uint32_t q = data.labelOffsets[rows[i]], q1 = data.labelOffsets[rows[i] + 1]; q < q1; ++q) lPts[cur[data.labelIndices[q]]++] = rows[i];
  }
  // Per label: summed |values| of its features (first-seen order), the kept ones as label-major pairs. The
  // labels are independent: blocks of kBlock labels are taken in turn by `threads` threads, each with its own
  // sums, and each block's pairs are kept apart and read back in block order, so that the pairs come out in
  // label order as one thread makes them, whatever the number of threads.
  struct Pairs {
    std::vector<uint32_t> f, l;
    std::vector<float> w;
  };
  constexpr uint32_t kBlock = 256;
  const uint32_t nOut = slice ? nSlice : numLabels;
  const uint32_t nBlocks = (nOut + kBlock - 1) / kBlock;
  std::vector<Pairs> blocks(nBlocks);
  std::atomic<uint32_t> nextBlock{0};
  const uint32_t T = std::max(1u, std::min(threads, nBlocks));
  fork_join(T, [&](uint32_t) {
    std::vector<double> acc(inputDim, 0.0);
    std::vector<uint32_t> touched, keep;
    const auto before = [&acc](uint32_t a, uint32_t b) { return acc[a] > acc[b] || (acc[a] == acc[b] && a < b); };
    for (uint32_t blk; (blk = nextBlock.fetch_add(1)) < nBlocks;) {
      Pairs& pr = blocks[blk];
      for (uint32_t e = blk * kBlock, e1 = std::min(nOut, e + kBlock); e < e1; ++e) {
        const uint32_t j = slice ? slice[e] : e;
        touched.clear();
        for (uint32_t p = lOff[j]; p < lOff[j + 1]; ++p) {
          const uint32_t r = lPts[p];
          for (uint32_t q = data.offsets[r], q1 = data.offsets[r + 1]; q < q1; ++q) {
            const uint32_t f = data.indices[q];
            if (acc[f] == 0) touched.push_back(f);
            double a = std::fabs(double(data.values[q]));
            if (!(a > 0)) a = std::numeric_limits<double>::denorm_min();  // a zero value still marks the feature as seen
            acc[f] += a;
          }
        }
        if (touched.empty()) continue;
        keep.assign(touched.begin(), touched.end());
        if (keep.size() > maxPerLabel) {
          std::partial_sort(keep.begin(), keep.begin() + maxPerLabel, keep.end(), before);
          keep.resize(maxPerLabel);
        }
        if (minShare > 0) {
          // A frequent label's centroid spreads over common words: below minShare of its norm they are dropped.
          double all = 0;
          for (uint32_t f : touched) all += acc[f] * acc[f];
          const double cut = minShare * std::sqrt(all);
          uint32_t best = keep[0];
          for (uint32_t f : keep) if (before(f, best)) best = f;
          keep.erase(std::remove_if(keep.begin(), keep.end(), [&](uint32_t f) { return !(acc[f] >= cut || f == best); }), keep.end());
        }
        double norm = 0;
        for (uint32_t f : keep) norm += acc[f] * acc[f];
        const double scale = norm > 0 ? init / std::sqrt(norm) : 0;  // a label whose features are all 0-valued starts at 0
        for (uint32_t f : keep) {
          pr.f.push_back(f);
          pr.l.push_back(e);
          pr.w.push_back(float(acc[f] * scale));
        }
        for (uint32_t f : touched) acc[f] = 0;
      }
    }
  });
  size_t nnz = 0;
  for (const Pairs& pr : blocks) nnz += pr.f.size();
  // Feature-major CSR (stable counting sort: labels stay ascending within a feature).
  if (nnz > 0xFFFFFFFFu) throw ArgError("the wide part would hold " + std::to_string(nnz) + " pairs (at most 2^32 - 1): lower maxPerLabel");
  out.offsets.assign(size_t(inputDim) + 1, 0);
  out.labels.resize(nnz);
  out.weights.resize(nnz);
  for (const Pairs& pr : blocks)
    for (uint32_t f : pr.f) ++out.offsets[f + 1];
  for (uint32_t f = 0; f < inputDim; ++f) out.offsets[f + 1] += out.offsets[f];
  std::vector<uint32_t> pos(out.offsets.begin(), out.offsets.end() - 1);
  for (const Pairs& pr : blocks)
    for (size_t e = 0; e < pr.f.size(); ++e) {
      const uint32_t at = pos[pr.f[e]]++;
      out.labels[at] = pr.l[e];
      out.weights[at] = pr.w[e];
    }
}

}  // namespace net
}  // namespace sl
