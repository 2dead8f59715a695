// pbench's performance report (--report FILE.html, --report-json FILE): one self-contained file
// to keep and share after the run: the job, the cluster, each worker's timeline (the task stream),
// throughput over time, each device's busy share and NVML figures (clock, temperature, power), and
// the stragglers. The HTML embeds the JSON and draws it with inline script: no network needed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

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
// What other pages of pbench share with it (the burn report): the head up to an open <style>
// holding the report's styles, a JSON document made safe to embed in a <script> element, and a
// page script with "/*TASK_LANES_JS*/" replaced by the shared drawing code (laneColour, drawLanes,
// el, bytes, table, lineChart).
std::string_view report_page_head();
std::string json_for_script(const nlohmann::json& report);
std::string with_page_scripts(std::string_view script);
// Writes `text` to path (atomically: a temporary file, then rename), or says why it cannot.
psched::Status write_file(const std::string& path, const std::string& text);

}  // namespace pbench
