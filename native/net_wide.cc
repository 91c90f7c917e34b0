// The wide part's terms of a slice, sorted by label (net_wide.h).
#include "net_wide.h"

#include <algorithm>

#include "napi_util.h"

namespace sl {
namespace net {

void wide_sort_by_label(std::vector<WideTerm>& t) {
  std::stable_sort(t.begin(), t.end(), [](const WideTerm& a, const WideTerm& b) {
    return a.label != b.label ? a.label < b.label : a.sample < b.sample;
  });
}

}  // namespace net
}  // namespace sl
