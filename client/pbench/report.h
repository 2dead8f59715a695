// pbench's performance report (--report FILE.html, --report-json FILE): one self-contained file
// to keep and share after the run: the job, the cluster, each worker's timeline (the task stream),
// throughput over time, each device's busy share and NVML figures (clock, temperature, power), and
// the stragglers. The HTML embeds the JSON and draws it with inline script: no network needed.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "pclient/client.h"

namespace pbench {

// The report's data: the job as run, the workers after it, its result with devices and timeline.
nlohmann::json report_json(const pclient::Job& job, const pclient::Result& result,
                           const std::vector<pclient::WorkerInfo>& workers);
// The HTML page around that data.
std::string report_html(const nlohmann::json& report);
// Writes `text` to path (atomically: a temporary file, then rename), or says why it cannot.
psched::Status write_file(const std::string& path, const std::string& text);

}  // namespace pbench
