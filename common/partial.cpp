#include "common/partial.h"

#include <cstddef>

namespace psched {
namespace {

PartialSum tree(const PartialSum* p, size_t n) {
  if (n == 0) return PartialSum{};
  if (n == 1) return p[0];
  const size_t half = n / 2;
  return combine(tree(p, half), tree(p + half, n - half));
}

}  // namespace

PartialSum combine_in_order(const std::vector<PartialSum>& partials) {
  return tree(partials.data(), partials.size());
}

}  // namespace psched
