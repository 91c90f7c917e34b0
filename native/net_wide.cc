// The wide part's terms of a slice (net_wide.h).
#include "net_wide.h"

#include <algorithm>

#include "napi_util.h"

namespace sl {
namespace net {

void wide_terms(std::vector<WideTerm>& out, const NetLayer& L, const CsrView& data, const uint32_t* rows, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t r = rows[i];
    for (uint32_t q = data.offsets[r], q1 = data.offsets[r + 1]; q < q1; ++q) {
      const uint32_t f = data.indices[q];  // < D: check_slice
      const float x = data.values[q];
      for (uint32_t e = L.wideOff[f], e1 = L.wideOff[f + 1]; e < e1; ++e)
        if (L.wideLab[e] < L.outDim) out.push_back({L.wideLab[e], i, e, x});  // always (checked when built)
    }
  }
}

void wide_sort_by_label(std::vector<WideTerm>& t) {
  std::stable_sort(t.begin(), t.end(), [](const WideTerm& a, const WideTerm& b) {
    return a.label != b.label ? a.label < b.label : a.sample < b.sample;
  });
}

}  // namespace net
}  // namespace sl
