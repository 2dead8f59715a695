#include "burn_report.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>

#include "report.h"
#include "cluster_report.h"

namespace pbench {

using nlohmann::json;

namespace {

double rounded(double v, double unit) { return std::round(v / unit) * unit; }

json gpu_json(const BurnLedger& ledger, const BurnGpu& g) {
  const GpuVerdict v = ledger.verdict_of(g);
  json series = json::array();
  for (const auto& p : g.series)
    series.push_back(json::array({rounded(p.seconds, 1e-3), std::round(p.bytes_per_second), rounded(p.sm_clock_mhz, 1),
                                  rounded(p.temperature_c, 1), rounded(p.power_watts, 0.1)}));
  json j = {{"worker", g.name},
            {"worker_id", g.worker_id},
            {"host", g.host},
            {"device", g.device},
            {"uuid", g.uuid},
            {"verdict", verdict_name(v.verdict)},
            {"failures", v.failures},
            {"warnings", v.warnings},
            {"bytes", g.bytes_now - g.bytes_at_join},
            {"chunks", g.chunks_now - g.chunks_at_join},
            {"busy_seconds", g.busy_now - g.busy_at_join},
            {"bytes_per_second", g.bytes_per_second()},
            {"model_median_bytes_per_second", v.median_bytes_per_second},
            {"joined_seconds", g.joined_seconds},
            {"left_seconds", g.left_seconds >= 0 ? json(g.left_seconds) : json(nullptr)},
            {"last_words", g.last_words.empty() ? json(nullptr) : json(g.last_words)},
            {"series_columns", {"seconds", "bytes_per_second", "sm_clock_mhz", "temperature_c", "power_watts"}},
            {"series", std::move(series)}};
  if (g.has_gpu) {
    j["gpu"] = {{"ecc_uncorrected_start", g.ecc_uncorrected_start},
                {"ecc_uncorrected_end", g.ecc_uncorrected_now},
                {"ecc_supported", g.ecc_seen},
                {"pcie_generation", g.pcie_generation},
                {"pcie_width", g.pcie_width},
                {"pcie_max_width", g.pcie_max_width},
                {"pcie_max_generation", g.pcie_max_generation},
                {"remap_supported", g.remapped_rows.seen},
                {"remapped_rows_start", g.remapped_rows.start},
                {"remapped_rows_end", g.remapped_rows.now},
                {"remap_pending", g.remap_pending},
                {"remap_failed", g.remap_failed},
                {"retired_supported", g.retired_pages.seen},
                {"retired_pages_start", g.retired_pages.start},
                {"retired_pages_end", g.retired_pages.now},
                {"retired_pending", g.retired_pending},
                {"max_temperature_c", g.max_temperature_c},
                {"throttle_reasons", g.throttle_reasons}};
  } else {
    j["gpu"] = nullptr;
  }
  return j;
}

json mismatch_json(const BurnMismatch& m) {
  json copies = json::array();
  for (const auto& c : m.mismatch.copies)
    copies.push_back({{"worker", c.worker_name}, {"device", c.device_name}, {"sum", c.sum}, {"count", c.count},
                      {"suspect", c.suspect}});
  return {{"job_id", m.job_id}, {"job", m.job}, {"chunk", m.mismatch.chunk}, {"chunks", m.mismatch.chunks},
          {"note", m.mismatch.note}, {"copies", std::move(copies)}};
}

}  // namespace

json burn_report_json(const BurnLedger& ledger, const BurnTotals& t) {
  json gpus = json::array();
  size_t failed = 0, warned = 0;
  for (const auto& [name, g] : ledger.gpus()) {
    gpus.push_back(gpu_json(ledger, g));
    const std::string v = gpus.back()["verdict"];
    failed += v == "fail";
    warned += v == "warn";
  }
  json mismatches = json::array();
  for (const auto& m : ledger.mismatches()) mismatches.push_back(mismatch_json(m));
  json events = json::array();
  for (const auto& e : ledger.events()) events.push_back({{"seconds", rounded(e.seconds, 1e-3)}, {"text", e.text}});
  uint64_t gpu_bytes = 0;
  for (const auto& [name, g] : ledger.gpus()) gpu_bytes += g.bytes_now - g.bytes_at_join;
  const pclient::BurnVerdict verdict = ledger.cluster_verdict();
  return {{"burn",
           {{"verdict", verdict_name(verdict)},
            {"exit_code", t.interrupted_by != 0 && verdict != pclient::BurnVerdict::kFail ? 128 + t.interrupted_by
                                                                            : burn_exit_code(verdict)},
            {"asked_seconds", t.asked_seconds},
            {"seconds", t.seconds},
            {"interrupted", t.interrupted_by != 0},
            {"gpus", ledger.gpus().size()},
            {"gpus_failed", failed},
            {"gpus_warned", warned},
            {"jobs", t.jobs},
            {"jobs_cut", t.jobs_cut},
            {"chunks", t.chunks},
            {"verified_chunks", t.verified_chunks},
            {"bytes", t.bytes},
            {"bytes_computed", gpu_bytes},
            {"bytes_per_second", t.seconds > 0 ? double(gpu_bytes) / t.seconds : 0.0},
            {"mismatch_count", ledger.mismatch_count()},
            {"cluster_failures", ledger.cluster_failures()},
            {"slow_fraction", ledger.limits().slow_fraction},
            {"temperature_limit_c", ledger.limits().temperature_limit_c}}},
          {"gpus", std::move(gpus)},
          {"mismatches", std::move(mismatches)},
          {"events", std::move(events)}};
}

void print_burn_text(const json& report) {
  for (const json& g : report["gpus"]) {
    std::printf("GPU '%s' on %s (%s): %s  %s/s over %.1f s\n", g["worker"].get<std::string>().c_str(),
                g["host"].get<std::string>().c_str(), g["device"].get<std::string>().c_str(),
                g["verdict"].get<std::string>() == "pass" ? "PASS" : g["verdict"].get<std::string>() == "warn" ? "WARN" : "FAIL",
                human_bytes(g["bytes_per_second"].get<double>()).c_str(),
                (g["left_seconds"].is_null() ? report["burn"]["seconds"].get<double>() : g["left_seconds"].get<double>()) -
                    g["joined_seconds"].get<double>());
    for (const json& f : g["failures"]) std::printf("  fail: %s\n", f.get<std::string>().c_str());
    for (const json& w : g["warnings"]) std::printf("  warn: %s\n", w.get<std::string>().c_str());
  }
  const json& b = report["burn"];
  for (const json& f : b["cluster_failures"]) std::printf("Cluster fail: %s\n", f.get<std::string>().c_str());
  const std::string v = b["verdict"];
  std::printf("Burn: %s: %zu GPUs, %zu failed, %zu warned; %llu jobs (%llu chunks verified, %llu mismatches) in %.1f s%s\n",
              v == "pass" ? "PASS" : v == "warn" ? "WARN" : "FAIL", b["gpus"].get<size_t>(),
              b["gpus_failed"].get<size_t>(), b["gpus_warned"].get<size_t>(),
              (unsigned long long)b["jobs"].get<uint64_t>(), (unsigned long long)b["verified_chunks"].get<uint64_t>(),
              (unsigned long long)b["mismatch_count"].get<uint64_t>(), b["seconds"].get<double>(),
              b["interrupted"].get<bool>() ? " (interrupted)" : "");
  std::fflush(stdout);
}

namespace {

constexpr std::string_view kBurnBody = R"PSCHED_BURN(<title>psched burn-in report</title></head><body>
<h1>psched burn-in report</h1>
<div id="verdict"></div>
<h2>GPUs</h2><div id="gpus"></div>
<h2>Mismatches</h2><div id="mismatches"></div>
<h2>Throughput over time <span class="muted">(per GPU, between heartbeats)</span></h2><canvas id="burn-throughput"></canvas>
<h2>GPUs over the burn <span class="muted">(from their heartbeats; none without NVML)</span></h2>
<div id="gpu-none" class="muted"></div>
<h3>SM clock (MHz)</h3><canvas id="burn-clock"></canvas>
<h3>Temperature (°C)</h3><canvas id="burn-temp"></canvas>
<h3>Power (W)</h3><canvas id="burn-power"></canvas>
<h2>Events</h2><div id="events"></div>
<script id="report-data" type="application/json">)PSCHED_BURN";

constexpr std::string_view kBurnScript = R"PSCHED_BURN(</script>
<script>
"use strict";
/*TASK_LANES_JS*/
const R = JSON.parse(document.getElementById("report-data").textContent);
function verdict(v) { return el("span", v.toUpperCase(), "verdict-" + v); }
const B = R.burn;
const head = document.getElementById("verdict");
head.appendChild(el("p", "Cluster: ")).appendChild(verdict(B.verdict));
table("verdict", ["GPUs", "failed", "warned", "jobs", "chunks verified", "mismatches", "computed", "throughput", "seconds"],
  [[B.gpus, B.gpus_failed, B.gpus_warned, B.jobs + (B.jobs_cut ? " (+" + B.jobs_cut + " cut)" : ""),
    B.verified_chunks, B.mismatch_count, bytes(B.bytes_computed), bytes(B.bytes_per_second) + "/s",
    B.seconds.toFixed(1) + (B.interrupted ? " (interrupted)" : "") + " of " + B.asked_seconds.toFixed(0)]]);
for (const f of B.cluster_failures) head.appendChild(el("p", "cluster: " + f, "slow"));
function reasons(g) { const d = el("div", null, "reasons");
  for (const f of g.failures) d.appendChild(el("div", "fail: " + f, "slow"));
  for (const w of g.warnings) d.appendChild(el("div", "warn: " + w, "warn"));
  if (!g.failures.length && !g.warnings.length) d.appendChild(el("span", "–", "muted")); return d; }
table("gpus", ["worker", "host", "device", "verdict", "throughput", "of model median", "chunks", "ECC uncorr.",
               "remapped rows / retired pages", "PCIe", "max temp", "reasons"],
  R.gpus.map(g => [g.worker, g.host, g.device, verdict(g.verdict), bytes(g.bytes_per_second) + "/s",
    g.model_median_bytes_per_second ? (100 * g.bytes_per_second / g.model_median_bytes_per_second).toFixed(0) + "%" : "–",
    g.chunks, g.gpu ? g.gpu.ecc_uncorrected_start + " → " + g.gpu.ecc_uncorrected_end : "–",
    g.gpu && g.gpu.remap_supported ? g.gpu.remapped_rows_start + " → " + g.gpu.remapped_rows_end +
      (g.gpu.remap_pending ? " pending" : "") + (g.gpu.remap_failed ? " failed" : "") :
    g.gpu && g.gpu.retired_supported ? "retired pages " + g.gpu.retired_pages_start + " → " + g.gpu.retired_pages_end +
      (g.gpu.retired_pending ? " pending" : "") : "unknown",
    g.gpu && g.gpu.pcie_max_width ? "gen" + g.gpu.pcie_generation + (g.gpu.pcie_max_generation ? " of gen" + g.gpu.pcie_max_generation : "") + " x" + g.gpu.pcie_width + " of x" + g.gpu.pcie_max_width : "–",
    g.gpu ? g.gpu.max_temperature_c + " °C" : "–", reasons(g)]));
if (!R.mismatches.length) document.getElementById("mismatches").appendChild(el("p", "none: every copy agreed"));
else table("mismatches", ["job", "chunk", "copies"], R.mismatches.map(m => [
  "#" + m.job_id + " " + m.job, m.chunks === 1 ? m.chunk : m.chunk + " to " + (m.chunk + m.chunks - 1),
  m.copies.map(c => c.worker + " " + c.sum + (c.suspect ? " (suspect)" : "")).join("; ")]));
const series = (col, gs) => gs.map(g => ({name: g.worker, points: g.series.map(p => [p[0], p[col]])}));
lineChart(document.getElementById("burn-throughput"), series(1, R.gpus), y => bytes(y) + "/s");
const nv = R.gpus.filter(g => g.gpu);
if (!nv.length) document.getElementById("gpu-none").textContent = "No NVML figures in this burn.";
for (const [id, col, unit] of [["burn-clock", 2, "MHz"], ["burn-temp", 3, "°C"], ["burn-power", 4, "W"]])
  lineChart(document.getElementById(id), series(col, nv).map(l => ({name: l.name, points: l.points.filter(p => p[1] > 0)})),
            y => y.toFixed(0) + " " + unit);
if (!R.events.length) document.getElementById("events").appendChild(el("p", "none"));
else table("events", ["at", "what"], R.events.map(e => [e.seconds.toFixed(1) + " s", e.text]));
document.body.setAttribute("data-rendered", "yes");
</script></body></html>
)PSCHED_BURN";

}  // namespace

std::string burn_report_html(const json& report) {
  return std::string(report_page_head()) +
         ".verdict-pass { color:#1f9d55; font-weight:600; } .verdict-warn, .warn { color:#b7791f; font-weight:600; }\n"
         ".verdict-fail { color:#d64545; font-weight:600; } .reasons { white-space:normal; min-width:360px; max-width:640px; }\n</style>" +
         std::string(kBurnBody) + json_for_script(report) + with_page_scripts(kBurnScript);
}

psched::Status write_burn_report(const std::string& path, const json& report) {
  const bool as_json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  const std::string text = as_json ? report.dump() + "\n" : burn_report_html(report);
  if (psched::Status st = write_file(path, text); !st) return st;
  std::fprintf(stderr, "Burn report: %s (%zu bytes)\n", path.c_str(), text.size());
  return psched::Status::ok();
}

}  // namespace pbench
