// The one translation from the public pclient::Job to the internal psched::JobSpec (and of a
// Result back to a PartialSum), shared by
// libpclient, pbench and the tests (not installed: the public header knows nothing of JobSpec).
#pragma once

#include "core/job_spec.h"
#include "core/partial.h"
#include "pclient/client.h"
#include "storage/open.h"

namespace pclient {

// Throws pclient::Error for an unknown dtype or generator name; other fields are copied as they are
// (psched::validate() judges them).
psched::JobSpec job_spec_of(const Job& job);

// The array in `input` as its header or metadata describes it (storage/open.h); throws Error with
// storage's one line (the path and what is wrong). Python's psched.array opens files with it too.
psched::OpenedArray opened_array(const Input& input);

// The job's result as the internal PartialSum (the exact sum rebuilt from its terms), for
// psched::check_result().
psched::PartialSum partial_of(const Result& result);

}  // namespace pclient
