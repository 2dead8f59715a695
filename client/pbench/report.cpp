#include "report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>

#include "app/task_lanes_js.h"
#include "cluster_report.h"
#include "core/worker_info_json.h"

namespace pbench {

using nlohmann::json;

namespace {

// Throughput over the run in this many steps: enough to show a slow start or a long tail.
constexpr int kThroughputBuckets = 100;

// Rounded to the microsecond: the report of a 250,000-chunk job stays small.
double us(double seconds) { return std::round(seconds * 1e6) / 1e6; }

json throughput_json(const pclient::Job& job, const pclient::Result& r) {
  const double span = r.scheduler_seconds > 0 ? r.scheduler_seconds : r.wall_seconds;
  json out = json::array();
  if (span <= 0 || r.timeline.empty() || r.chunks == 0) return out;
  const double chunk_bytes = double(job.bytes()) / double(r.chunks);
  std::vector<double> bytes(kThroughputBuckets, 0.0);
  const double step = span / kThroughputBuckets;
  for (const auto& t : r.timeline) {
    const int b = std::clamp(int(t.end_seconds / step), 0, kThroughputBuckets - 1);
    bytes[size_t(b)] += chunk_bytes * t.chunks;
  }
  for (int b = 0; b < kThroughputBuckets; ++b)
    out.push_back(json::array({us((b + 1) * step), bytes[size_t(b)] / step}));
  return out;
}

}  // namespace

json report_json(const pclient::ResultJsonInput& in) {
  const pclient::Result& r = in.result;
  pclient::ResultJsonInput with_series = in;
  with_series.gpu_series = true;
  json j;
  j["job"] = pclient::result_json(with_series);
  j["cluster"] = {{"summary", in.after ? summarize(*in.after) : summarize({})}};
  json lanes = json::array();
  for (const auto& d : r.devices) lanes.push_back({{"id", d.worker_id}, {"name", d.name}, {"slow", d.slow}});
  json segments = json::array();
  for (const auto& t : r.timeline)
    segments.push_back(psched::task_segment_json(r.job_id, t.worker_id, t.first_chunk, t.chunks,
                                                 us(t.start_seconds), us(t.end_seconds)));
  j["timeline"] = {{"lanes", std::move(lanes)}, {"segments", std::move(segments)}};
  j["throughput"] = throughput_json(in.job, r);
  return j;
}

namespace {

// The page's head up to its open <style> element: shared with pbench --burn's report.
constexpr std::string_view kStyleHead = R"PSCHED_REPORT(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<style>
body { font:14px/1.45 system-ui, sans-serif; margin:0 auto; padding:16px 24px; max-width:1300px;
       color:#1d2330; background:#fff; }
h1 { font-size:20px; } h2 { font-size:16px; margin-top:28px; border-bottom:1px solid #e3e6ec; }
table { border-collapse:collapse; } th, td { padding:4px 12px; text-align:left; white-space:nowrap;
        border-bottom:1px solid #eef0f4; font-variant-numeric:tabular-nums; }
th { color:#677084; font-weight:500; font-size:12px; } td.num { text-align:right; }
.slow { color:#d64545; font-weight:600; } .muted { color:#677084; }
canvas { display:block; width:100%; color:#1d2330; }
.bar { background:#e8ebf1; width:160px; height:14px; } .bar div { background:#1f9d55; height:100%; }
)PSCHED_REPORT";

constexpr std::string_view kPageHead = R"PSCHED_REPORT(</style><title>psched performance report</title></head><body>
<h1>psched performance report</h1>
<div id="job"></div>
<h2>Cluster</h2><div id="cluster"></div>
<h2>Stragglers</h2><div id="stragglers"></div>
<h2>Devices</h2><div id="devices"></div>
<h2>Timeline per worker <span class="muted">(one bar per result batch, on the scheduler's clock)</span></h2>
<canvas id="timeline"></canvas>
<h2>Throughput over time</h2><canvas id="throughput"></canvas>
<h2>GPUs over the run <span class="muted">(one line per GPU, from its heartbeats; none without NVML)</span></h2>
<div id="gpu-none" class="muted"></div>
<h3>SM clock (MHz)</h3><canvas id="gpu-clock"></canvas>
<h3>Temperature (°C)</h3><canvas id="gpu-temp"></canvas>
<h3>Power (W)</h3><canvas id="gpu-power"></canvas>
<script id="report-data" type="application/json">)PSCHED_REPORT";

constexpr std::string_view kPageScript = R"PSCHED_REPORT(</script>
<script>
"use strict";
/*TASK_LANES_JS*/
const R = JSON.parse(document.getElementById("report-data").textContent);
const j = R.job;
// var and std only when the job computed them (--stats var,std).
const spread = "var" in j ? [["var (ddof " + j.ddof + ")", j.var === null ? "–" : j.var],
                             ["std", j.std === null ? "–" : j.std]] : [];
// The GPUs' energy from NVML (null without it).
const energy = j.energy_joules === null ? "–" : j.energy_joules.toFixed(0) + " J (" + j.joules_per_tb.toFixed(0) + " J/TB)";
table("job", ["job", "array", "chunks", "seconds", "throughput", "energy", "mean", ...spread.map(c => c[0]), "retries"],
  [["#" + j.job_id + " " + (j.input || j.generator) + (j.fused ? " (fused)" : ""),
    j.rows + " x " + j.cols + " " + j.dtype + " (" + bytes(j.bytes) + ")",
    j.chunks + " of " + j.chunk_rows + " x " + j.chunk_cols, j.seconds.toFixed(3),
    bytes(j.bytes_per_second) + "/s", energy, j.mean === null ? "–" : j.mean, ...spread.map(c => c[1]), j.retries]]);
document.getElementById("cluster").appendChild(el("p", R.cluster.summary));
table("cluster", ["worker", "host", "backend", "device", "threads", "CPUs", "GPU"],
  j.devices.map(w => [w.name, w.host, w.backend, w.device, w.threads, w.cpu_affinity || "–",
                      w.gpu ? w.gpu.uuid : "–"]));
const sg = document.getElementById("stragglers");
if (!j.stragglers.length) sg.appendChild(el("p", "none: every device within 10% of the median"));
for (const s of j.stragglers) sg.appendChild(el("p", s.worker + " on " + s.host + ": " +
                                                 (s.cause || "no cause seen by NVML"), "slow"));
const runs = j.devices.filter(d => d.run).map(d => d.run);  // the devices that took part
function fig(f, unit) { return f ? f.min.toFixed(0) + " / " + f.mean.toFixed(0) + " / " + f.max.toFixed(0) + unit : "–"; }
table("devices", ["worker", "chunks", "throughput", "busy share", "SM clock min/mean/max", "max",
                  "temperature", "power", "energy", "SM util", "throttled", "straggler"],
  runs.map(d => { const b = el("div", null, "bar"), f = el("div");
    f.style.width = Math.min(100, 100 * d.busy_share).toFixed(1) + "%"; b.appendChild(f);
    b.title = (100 * d.busy_share).toFixed(1) + "%";
    const g = d.gpu;
    return [d.worker, d.chunks, bytes(d.bytes_per_second) + "/s", b,
      g ? fig(g.sm_clock_mhz, " MHz") : "–", g ? g.sm_clock_max_mhz + " MHz" : "–",
      g ? fig(g.temperature_c, " °C") : "–", g ? fig(g.power_watts, " W") : "–",
      d.energy_joules > 0 ? d.energy_joules.toFixed(0) + " J" : "–",
      g ? fig(g.sm_utilisation_pct, "%") : "–", g ? (g.throttle || "no") : "–",
      d.slow ? el("span", "slow: " + (d.cause || "cause unknown"), "slow") : "no"]; }));
const end = Math.max(j.scheduler_seconds, ...R.timeline.segments.map(s => s[5]), 1e-6);
drawLanes(document.getElementById("timeline"), R.timeline.lanes, R.timeline.segments, 0, end);
(function throughput() {
  const c = document.getElementById("throughput"), w = c.clientWidth || 900, h = 180;
  c.width = w; c.height = h; c.style.height = h + "px";
  const g = c.getContext("2d"), pts = R.throughput;
  if (!pts.length) return;
  const ymax = Math.max(...pts.map(p => p[1]), 1), xmax = pts[pts.length - 1][0];
  g.strokeStyle = "#2f6fde"; g.lineWidth = 2; g.beginPath();
  pts.forEach((p, i) => { const x = 60 + (w - 70) * p[0] / xmax, y = h - 20 - (h - 30) * p[1] / ymax;
                          i ? g.lineTo(x, y) : g.moveTo(x, y); });
  g.stroke(); g.fillStyle = "#677084"; g.font = "12px system-ui";
  g.fillText(bytes(ymax) + "/s", 2, 14); g.fillText("0", 2, h - 20); g.fillText(xmax.toFixed(2) + " s", w - 60, h - 4);
})();
const gpus = runs.filter(d => d.gpu && d.gpu.series && d.gpu.series.length);
if (!gpus.length) document.getElementById("gpu-none").textContent = "No NVML figures in this run.";
for (const [id, col, unit] of [["gpu-clock", 1, "MHz"], ["gpu-temp", 2, "°C"], ["gpu-power", 3, "W"]])
  lineChart(document.getElementById(id), gpus.map(d => ({name: d.worker, points: d.gpu.series.map(p => [p[0], p[col]])})),
            y => y.toFixed(0) + " " + unit);
document.body.setAttribute("data-rendered", "yes");
</script></body></html>
)PSCHED_REPORT";

// What every pbench page draws with, after the task stream's drawing (laneColour): elements, sizes,
// tables, and line charts.
constexpr std::string_view kPageHelpersJs = R"PSCHED_REPORT(
function el(tag, text, cls) { const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text); if (cls) e.className = cls; return e; }
function bytes(n) { const u = ["B","kB","MB","GB","TB","PB"]; let i = 0;
  while (n >= 1000 && i < u.length - 1) { n /= 1000; i++; } return n.toFixed(2) + " " + u[i]; }
function table(id, head, rows) { const t = el("table"), h = el("tr");
  for (const c of head) h.appendChild(el("th", c)); t.appendChild(h);
  for (const r of rows) { const tr = el("tr");
    for (const c of r) { if (c instanceof Node) { const td = el("td"); td.appendChild(c); tr.appendChild(td); }
      else tr.appendChild(el("td", c)); } t.appendChild(tr); }
  document.getElementById(id).appendChild(t); }
// lines: [{name, points: [[x, y], ...]}], drawn on one scale, coloured like the task stream;
// label(ymax) names the top of the scale.
function lineChart(c, lines, label) {
  const w = c.clientWidth || 900, h = 160;
  c.width = w; c.height = h; c.style.height = h + "px";
  const g = c.getContext("2d"), all = lines.flatMap(l => l.points);
  if (!all.length) return;
  const xmax = Math.max(...all.map(p => p[0]), 1e-6), ymax = Math.max(...all.map(p => p[1]), 1e-6);
  g.font = "12px system-ui";
  lines.forEach((l, k) => {
    g.strokeStyle = laneColour(k + 1); g.lineWidth = 2; g.beginPath();
    l.points.forEach((p, i) => { const x = 60 + (w - 70) * p[0] / xmax, y = h - 20 - (h - 30) * p[1] / ymax;
                                 i ? g.lineTo(x, y) : g.moveTo(x, y); });
    g.stroke(); g.fillStyle = laneColour(k + 1); g.fillText(l.name, 70 + 120 * k, 12);
  });
  g.fillStyle = "#677084";
  g.fillText(label(ymax), 2, 24); g.fillText("0", 2, h - 20); g.fillText(xmax.toFixed(2) + " s", w - 60, h - 4);
}
)PSCHED_REPORT";

}  // namespace

std::string_view report_page_head() { return kStyleHead; }

std::string with_page_scripts(std::string_view script) {
  std::string out(script);
  const std::string_view marker = "/*TASK_LANES_JS*/";
  out.replace(out.find(marker), marker.size(), std::string(psched::kTaskLanesJs) + std::string(kPageHelpersJs));
  return out;
}

std::string json_for_script(const json& report) {
  // The data sits inside a <script> element: "</" must not end it early.
  std::string data = report.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string safe;
  safe.reserve(data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] == '<' && i + 1 < data.size() && data[i + 1] == '/') safe += "<\\";
    else safe += data[i];
  }
  return safe;
}

std::string report_html(const json& report) {
  return std::string(kStyleHead) + std::string(kPageHead) + json_for_script(report) + with_page_scripts(kPageScript);
}

psched::Status write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush())
      return psched::Status::error(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return psched::Status::error(fmt::format("cannot rename {} to {}: {}", tmp, path, std::strerror(errno)));
  return psched::Status::ok();
}

}  // namespace pbench
