#include "core/partial.h"

#include <fmt/format.h>

#include <cstring>

namespace psched {

void merge(PartialSum& into, const PartialSum& p) {
  into.exact.add(p.exact);
  into.exact.normalize();
  into.sum = into.exact.rounded_normalized();
  into.count += p.count;
  into.min = p.min < into.min ? p.min : into.min;
  into.max = p.max > into.max ? p.max : into.max;
  if (p.has_squares) {
    into.has_squares = true;
    into.squares.add(p.squares);
    into.squares.normalize();
  }
}

CompactPartial compact(const PartialSum& p) {
  CompactPartial c;
  c.exact = ExactTerms(p.exact);
  c.sum = c.exact.rounded();
  c.count = p.count;
  c.min = p.min;
  c.max = p.max;
  c.has_squares = p.has_squares;
  if (p.has_squares) c.squares = ExactTerms(p.squares);
  return c;
}

PartialSum expand(const CompactPartial& c) {
  PartialSum p;
  p.exact = c.exact.value();
  p.sum = c.sum;
  p.count = c.count;
  p.min = c.min;
  p.max = c.max;
  p.has_squares = c.has_squares;
  if (c.has_squares) p.squares = c.squares.value();
  return p;
}

bool same_bits(const PartialSum& a, const PartialSum& b) {
  const auto same = [](double x, double y) { return std::memcmp(&x, &y, sizeof x) == 0; };
  return same(a.sum, b.sum) && a.count == b.count && same(a.min, b.min) && same(a.max, b.max) &&
         same_value(a.exact, b.exact) && a.has_squares == b.has_squares && same_value(a.squares, b.squares);
}

std::string difference_from(const PartialSum& copy, const PartialSum& first) {
  std::string out;
  if (!same_value(copy.exact, first.exact)) {
    ExactSum d = copy.exact;
    for (const double t : first.exact.terms()) d.add(-t);
    out = fmt::format("exact sum {:+.17g} from the first copy's", d.rounded());
  }
  const auto add = [&](const std::string& s) { out += (out.empty() ? "" : ", ") + s; };
  if (!same_value(copy.squares, first.squares)) add("exact sum of squares");
  if (copy.count != first.count) add(fmt::format("count {} (first {})", copy.count, first.count));
  if (std::memcmp(&copy.min, &first.min, sizeof(double)) != 0) add(fmt::format("min {:.17g} (first {:.17g})", copy.min, first.min));
  if (std::memcmp(&copy.max, &first.max, sizeof(double)) != 0) add(fmt::format("max {:.17g} (first {:.17g})", copy.max, first.max));
  return out;
}

}  // namespace psched
