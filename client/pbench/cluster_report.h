// What pbench prints about the cluster: sizes for people, the progress bar, the one-line cluster
// summary and the worker list. main.cpp parses, runs and reports; this holds the pieces the reports
// share (a run's result and each worker's share of it as JSON: client/result_json.h).
#pragma once

#include <string>
#include <vector>

#include "pclient/client.h"

namespace pbench {

// "1.82 TB"-style sizes (powers of 1000, as DeepOps' sum.py prints them).
std::string human_bytes(double bytes);
// The terminal progress bar of a running job (stderr).
void draw_progress(const pclient::Progress& p);

// "2 workers: 2 x cuda NVIDIA H100 80GB HBM3 (79.1 GiB, sm_90)" style, grouped by kind of device.
std::string summarize(const std::vector<pclient::WorkerInfo>& workers);
// --cluster-info: the workers, as text or JSON.
void print_workers(const std::vector<pclient::WorkerInfo>& workers, bool json);

}  // namespace pbench
