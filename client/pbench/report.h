// pbench's performance report (--report FILE.html, --report-json FILE): one self-contained file
// to keep and share after the run: the job, the cluster, each worker's timeline (the task stream),
// throughput over time, each device's busy share and NVML figures (clock, temperature, power), and
// the stragglers. The HTML embeds the JSON and draws it with inline script: no network needed.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "client/result_json.h"

namespace pbench {

// The report's data: "job", the job result (client/result_json.h's keys, as --json prints them,
// with each GPU's heartbeats over the job), "cluster" (its summary line), "timeline" (the task
// stream's lanes and segments) and "throughput" over time.
nlohmann::json report_json(const pclient::ResultJsonInput& in);
// The HTML page around that data.
std::string report_html(const nlohmann::json& report);
// Writes `text` to path (atomically: a temporary file, then rename), or says why it cannot.
psched::Status write_file(const std::string& path, const std::string& text);

}  // namespace pbench
