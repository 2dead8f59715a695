#include "common/partial.h"

#include <cstddef>
#include <cstring>

namespace psched {
namespace {

PartialSum tree(const PartialSum* p, size_t n) {
  if (n == 0) return PartialSum{};
  if (n == 1) return p[0];
  const size_t half = n / 2;
  return combine(tree(p, half), tree(p + half, n - half));
}

}  // namespace

bool same_bits(const PartialSum& a, const PartialSum& b) {
  auto same = [](double x, double y) { return std::memcmp(&x, &y, sizeof x) == 0; };
  return same(a.sum, b.sum) && a.count == b.count && same(a.min, b.min) && same(a.max, b.max);
}

PartialSum combine_in_order(const std::vector<PartialSum>& partials) {
  return tree(partials.data(), partials.size());
}

}  // namespace psched
