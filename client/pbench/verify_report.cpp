#include "verify_report.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "core/partial.h"
#include "core/plural.h"

namespace pbench {

namespace {

psched::PartialSum partial_of(const pclient::VerifyCopy& c) {
  psched::PartialSum p;
  p.sum = c.sum;
  p.count = c.count;
  p.min = c.min;
  p.max = c.max;
  p.exact.add_terms(c.exact_terms.data(), c.exact_terms.size());
  p.has_squares = c.has_squares;
  p.squares.add_terms(c.squares_terms.data(), c.squares_terms.size());
  return p;
}

// "chunk 7: 'w1' (cpu model) sum 1.5 [suspect], 'w2' (...) sum 1.4999999999999998"; a range
// the scheduler could not narrow down to one chunk: "chunks 0 to 127: ...".
std::string describe(const pclient::VerifyMismatch& m) {
  std::string out = psched::chunks_text(m.chunk, m.chunks) + ":";
  for (size_t i = 0; i < m.copies.size(); ++i) {
    const pclient::VerifyCopy& c = m.copies[i];
    const std::string differs = psched::difference_from(partial_of(c), partial_of(m.copies.front()));
    out += fmt::format("{} worker '{}' ({}) sum {:.17g}{}{}", i == 0 ? "" : ",", c.worker_name, c.device_name,
                       c.sum, differs.empty() ? "" : " (" + differs + ")", c.suspect ? " [suspect]" : "");
  }
  if (!m.note.empty()) out += " (" + m.note + ")";
  return out;
}

}  // namespace

void print_verify(const pclient::Result& r) {
  std::printf("Verify: %llu chunks computed twice and compared bit for bit, %llu mismatches\n",
              (unsigned long long)r.verified_chunks, (unsigned long long)r.mismatch_count);
  if (r.same_worker_chunks > 0)
    std::printf("Verify: %llu of those chunks ran twice on the same worker (no other worker to "
                "compare against): that finds a worker that is not deterministic, not one that is "
                "consistently wrong\n",
                (unsigned long long)r.same_worker_chunks);
  for (const pclient::VerifyMismatch& m : r.mismatches)
    std::printf("Verify mismatch: %s\n", describe(m).c_str());
  if (r.mismatch_count > r.mismatches.size())
    std::printf("Verify: %llu more mismatches not listed\n",
                (unsigned long long)(r.mismatch_count - r.mismatches.size()));
}

std::string verify_problem(const pclient::Result& r) {
  if (r.mismatch_count == 0) return "";
  std::string suspects;
  for (const pclient::VerifyMismatch& m : r.mismatches)
    for (const pclient::VerifyCopy& c : m.copies)
      if (c.suspect && suspects.find("'" + c.worker_name + "'") == std::string::npos)
        suspects += fmt::format("{}'{}'", suspects.empty() ? "" : ", ", c.worker_name);
  const bool chunks = std::all_of(r.mismatches.begin(), r.mismatches.end(),
                                  [](const pclient::VerifyMismatch& m) { return m.chunks == 1; });
  return fmt::format("verify found {} whose copies differ (suspect workers: {})",
                     psched::counted(r.mismatch_count, chunks ? "chunk" : "range"), suspects);
}

}  // namespace pbench
