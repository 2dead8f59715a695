#include "net/job_definition.h"

#include "net/wire_convert.h"

namespace psched {

JobDefinition read_job_definition(wire::DefineJob::Reader in) {
  JobDefinition d;
  d.job_id = in.getJobId();
  d.partial_block = in.getPartialBlock();
  const JobSpec spec = from_wire(in.getSpec());
  d.status = validate(spec);
  if (d.status) d.spec = std::make_shared<const JobSpec>(normalized(spec));
  return d;
}

}  // namespace psched
