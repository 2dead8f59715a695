// The job result as JSON (result_json.h): the parts that need no template.
#include "client/result_json.h"

#include <algorithm>

#include "client/job_spec_of.h"
#include "core/json_out.h"
#include "core/reference_sums.h"

namespace pclient {

RunShare run_share(const WorkerInfo& w, const std::vector<WorkerInfo>& before, double seconds) {
  RunShare r{w.chunks_done, w.busy_seconds, 0};
  for (const WorkerInfo& b : before)
    if (b.id == w.id) {
      r.chunks -= b.chunks_done;
      r.busy_seconds -= b.busy_seconds;
    }
  if (seconds > 0) r.busy_fraction = r.busy_seconds / seconds / std::max<uint32_t>(1, w.threads);
  return r;
}

std::string reference_key_of(const Job& job) { return psched::reference_key(job_spec_of(job)); }

std::string source_name_of(const Job& job) { return psched::source_kind_name(job_spec_of(job).stored.kind); }

nlohmann::json result_json(const ResultJsonInput& in) {
  psched::JsonDoc doc;
  write_result_json(doc, in);
  return doc.take();
}

}  // namespace pclient
