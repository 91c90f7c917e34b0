#include "topk.h"

#include <limits>

namespace sl {

// A tiny min-heap on (value, id) with "worse" meaning smaller value, or equal value and larger id;
// the heap root is the worst kept element. k is small (<= a few hundred), so this beats a sort.
static inline bool worse(float va, uint32_t ia, float vb, uint32_t ib) {
  return va < vb || (va == vb && ia > ib);
}

static void sift_down(float* v, uint32_t* id, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && worse(v[l], id[l], v[m], id[m])) m = l;
    if (r < n && worse(v[r], id[r], v[m], id[m])) m = r;
    if (m == i) return;
    float tv = v[i]; v[i] = v[m]; v[m] = tv;
    uint32_t ti = id[i]; id[i] = id[m]; id[m] = ti;
    i = m;
  }
}

void topk_row(uint32_t* outIdx, float* outVal, const float* scores, const uint32_t* ids, size_t n, size_t k) {
  if (k == 0) return;
  size_t h = 0;  // heap size, stored in outVal/outIdx
  for (size_t i = 0; i < n; ++i) {
    float s = scores[i];
    if (s != s) continue;  // NaN scores never rank
    uint32_t id = ids ? ids[i] : static_cast<uint32_t>(i);
    if (h < k) {
      // sift up
      size_t j = h++;
      outVal[j] = s; outIdx[j] = id;
      while (j > 0) {
        size_t p = (j - 1) / 2;
        if (!worse(outVal[j], outIdx[j], outVal[p], outIdx[p])) break;
        float tv = outVal[j]; outVal[j] = outVal[p]; outVal[p] = tv;
        uint32_t ti = outIdx[j]; outIdx[j] = outIdx[p]; outIdx[p] = ti;
        j = p;
      }
    } else if (worse(outVal[0], outIdx[0], s, id)) {
      outVal[0] = s; outIdx[0] = id;
      sift_down(outVal, outIdx, h, 0);
    }
  }
  // Heap sort in place: repeatedly move the worst to the end -> descending order.
  for (size_t end = h; end > 1; --end) {
    float tv = outVal[0]; outVal[0] = outVal[end - 1]; outVal[end - 1] = tv;
    uint32_t ti = outIdx[0]; outIdx[0] = outIdx[end - 1]; outIdx[end - 1] = ti;
    sift_down(outVal, outIdx, end - 1, 0);
  }
  for (size_t j = h; j < k; ++j) {
    outIdx[j] = std::numeric_limits<uint32_t>::max();
    outVal[j] = -std::numeric_limits<float>::infinity();
  }
}

}  // namespace sl
