// The one translation from the public pclient::Job to the internal psched::JobSpec, shared by
// libpclient, pbench and the tests (not installed: the public header knows nothing of JobSpec).
#pragma once

#include "common/job_spec.h"
#include "pclient/client.h"

namespace pclient {

// Throws pclient::Error for an unknown dtype or generator name; other fields are copied as they are
// (psched::validate() judges them).
psched::JobSpec job_spec_of(const Job& job);

}  // namespace pclient
