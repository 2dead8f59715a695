// The dashboard's status page (/): one self-contained HTML document with inline CSS and JS, no
// external scripts, fonts or images, so it works on an air-gapped cluster. It fetches /api/status
// once a second and draws workers, running and recent jobs from it with DOM calls (textContent
// only: worker and client names come from peers and are never parsed as HTML).
#pragma once

#include <string>
#include <string_view>

#include "app/task_lanes_js.h"

namespace psched {

inline constexpr std::string_view kDashboardPage = R"PSCHED_PAGE(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>psched dashboard</title>
<style>
:root { --bg:#f6f7f9; --card:#fff; --ink:#1d2330; --muted:#677084; --line:#e3e6ec;
        --accent:#2f6fde; --ok:#1f9d55; --bad:#d64545; --warn:#c98a12; --track:#e8ebf1; }
@media (prefers-color-scheme: dark) {
  :root { --bg:#14171d; --card:#1c2028; --ink:#e4e8ef; --muted:#939bab; --line:#2c323d;
          --accent:#5b93f0; --track:#2a303b; }
}
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
       font:14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
header { display:flex; align-items:baseline; gap:16px; flex-wrap:wrap; padding:14px 24px;
         background:var(--card); border-bottom:1px solid var(--line); }
header h1 { margin:0; font-size:20px; letter-spacing:.5px; }
header .meta { color:var(--muted); }
#conn { margin-left:auto; font-weight:600; }
#conn.up { color:var(--ok); } #conn.down { color:var(--bad); }
main { padding:18px 24px; max-width:1400px; }
.tiles { display:grid; grid-template-columns:repeat(auto-fill, minmax(160px, 1fr)); gap:12px;
         margin-bottom:18px; }
.tile { background:var(--card); border:1px solid var(--line); border-radius:8px;
        padding:10px 14px; }
.tile .v { font-size:22px; font-weight:600; font-variant-numeric:tabular-nums; }
.tile .k { color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.6px; }
section { background:var(--card); border:1px solid var(--line); border-radius:8px;
          margin-bottom:18px; overflow-x:auto; }
section h2 { font-size:15px; margin:0; padding:10px 14px; border-bottom:1px solid var(--line); }
table { border-collapse:collapse; width:100%; }
th, td { text-align:left; padding:7px 14px; border-bottom:1px solid var(--line); white-space:nowrap;
         font-variant-numeric:tabular-nums; }
th { color:var(--muted); font-weight:500; font-size:12px; }
tr:last-child td { border-bottom:none; }
td.num, th.num { text-align:right; }
td.job { white-space:normal; min-width:200px; max-width:340px; }
td.job .small { display:block; overflow-wrap:anywhere; }
td.per { white-space:normal; }
.empty { color:var(--muted); padding:12px 14px; }
.progress { position:relative; height:18px; min-width:160px; background:var(--track);
            border-radius:9px; overflow:hidden; }
.progress .fill { height:100%; background:var(--accent); transition:width .4s ease; }
.progress.mem .fill { background:#8a63d2; } .progress.util .fill { background:var(--ok); }
.progress.failed .fill { background:var(--bad); }
.progress.cancelled .fill { background:var(--warn); }
.progress .label { position:absolute; inset:0; text-align:center; font-size:11px; line-height:18px;
                   font-weight:600; color:var(--ink); }
.state { font-weight:600; } .state.done { color:var(--ok); } .state.failed { color:var(--bad); }
.state.cancelled { color:var(--warn); } .state.running { color:var(--accent); }
.small { color:var(--muted); font-size:12px; }
footer { color:var(--muted); font-size:12px; padding:0 24px 18px; }
.warn { color:var(--warn); font-weight:600; } .bad { color:var(--bad); font-weight:600; }
.slow { color:var(--bad); font-weight:600; }
.verdict.pass { color:var(--ok); font-weight:600; }
#stream { display:block; width:100%; color:var(--ink); }
</style>
</head>
<body>
<header>
  <h1>psched</h1>
  <span class="meta" id="sched-version">version …</span>
  <span class="meta" id="sched-address"></span>
  <span class="meta" id="sched-uptime"></span>
  <span id="conn" class="down">connecting…</span>
</header>
<main>
  <div class="tiles" id="tiles"></div>
  <section><h2>Workers</h2>
    <table id="workers"><thead><tr>
      <th>Name</th><th>Host</th><th>Backend</th><th>Device</th><th>Memory used / total</th>
      <th>Utilisation</th><th class="num">In flight</th><th class="num">Chunks done</th>
      <th class="num">Throughput</th><th class="num">Verify mismatches</th></tr></thead><tbody></tbody></table>
    <div class="empty" id="workers-empty">No workers connected.</div>
  </section>
  <section><h2>GPUs</h2>
    <table id="gpus"><thead><tr>
      <th>Worker</th><th>GPU</th><th>SM / memory util</th><th>Memory used / total</th>
      <th class="num">SM clock / max</th><th class="num">Temp</th><th class="num">Power / limit</th>
      <th class="num">ECC corr / uncorr</th><th>PCIe</th><th>CPUs</th><th>Warnings</th>
      </tr></thead><tbody></tbody></table>
    <div class="empty" id="gpus-empty">No GPU health: no GPU workers, or NVML is not available to them.</div>
  </section>
  <section><h2>Burn-in <span class="small">(pbench --burn: each GPU's verdict so far)</span></h2>
    <table id="burns"><thead><tr>
      <th>Burn</th><th>Worker</th><th>Verdict</th><th class="num">Throughput</th>
      <th class="num">Chunks</th><th class="num">Mismatches</th><th>Why</th>
      </tr></thead><tbody></tbody></table>
    <div class="empty" id="burns-empty">No burn-in running.</div>
  </section>
  <section><h2>Task stream <span class="small">(last 30 s: one bar per result batch, coloured by job;
    it ends when the batch reached the scheduler)</span></h2>
    <canvas id="stream" height="40"></canvas>
  </section>
  <section><h2>Running jobs</h2>
    <table id="jobs"><thead><tr>
      <th>Job</th><th>Client</th><th>Progress</th><th class="num">Chunks</th>
      <th class="num">Elapsed</th><th class="num">Throughput</th><th>Per worker</th>
      </tr></thead><tbody></tbody></table>
    <div class="empty" id="jobs-empty">No jobs running.</div>
  </section>
  <section><h2>Recent jobs</h2>
    <table id="recent"><thead><tr>
      <th>Job</th><th>State</th><th>Client</th><th>Progress</th><th class="num">Seconds</th>
      <th class="num">Throughput</th><th class="num">Workers</th><th class="num">Sum</th>
      </tr></thead><tbody></tbody></table>
    <div class="empty" id="recent-empty">No finished jobs yet.</div>
  </section>
</main>
<footer>Refreshes every second from <a href="api/status">/api/status</a> ·
  <a href="metrics">/metrics</a> (Prometheus) · <a href="health">/health</a></footer>
<script>
"use strict";
/*TASK_LANES_JS*/
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function bytes(n) {
  if (n === null || n === undefined) return "–";
  const u = ["B", "kB", "MB", "GB", "TB", "PB"];
  let i = 0;
  while (Math.abs(n) >= 1000 && i < u.length - 1) { n /= 1000; i++; }
  return (i ? n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0) : n) + " " + u[i];
}
function rate(n) { return bytes(n) + "/s"; }
function duration(s) {
  if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + " s";
  const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
  return (d ? d + "d " : "") + (d || h ? h + "h " : "") + m + "m " + Math.floor(s % 60) + "s";
}
function progress(fraction, label, kind) {
  const p = el("div", "progress" + (kind ? " " + kind : ""));
  const pct = Math.max(0, Math.min(1, fraction || 0)) * 100;
  p.setAttribute("role", "progressbar");
  p.setAttribute("aria-valuemin", "0");
  p.setAttribute("aria-valuemax", "100");
  p.setAttribute("aria-valuenow", pct.toFixed(1));
  const f = el("div", "fill");
  f.style.width = pct.toFixed(2) + "%";
  p.appendChild(f);
  p.appendChild(el("span", "label", label));
  return p;
}
function row(cells) {
  const tr = el("tr");
  for (const c of cells) {
    if (c instanceof Node) { const td = el("td"); td.appendChild(c); tr.appendChild(td); }
    else if (c && typeof c === "object") {
      const td = el("td", c.cls, c.text);
      if (c.node) td.appendChild(c.node);
      tr.appendChild(td);
    } else tr.appendChild(el("td", null, c));
  }
  return tr;
}
function fill(tableId, rows) {
  const body = document.querySelector("#" + tableId + " tbody");
  body.replaceChildren(...rows);
  document.getElementById(tableId).style.display = rows.length ? "" : "none";
  document.getElementById(tableId + "-empty").style.display = rows.length ? "none" : "";
}
function jobCell(j, note) {
  const d = el("div");
  d.appendChild(el("strong", null, "#" + j.id));
  d.appendChild(el("span", "small", j.description + (note ? " — " + note : "")));
  return {cls: "job", node: d};
}
// A worker's name, with a red "straggler" mark when it is 10% or more below its job's median, and
// "stalled" when it held work and made no progress (its work ran elsewhere).
function workerName(w) {
  const d = el("span");
  d.appendChild(el("span", null, w.name));
  if (w.slow) d.appendChild(el("span", "slow", " straggler"));
  if (w.stalled) d.appendChild(el("span", "slow", " stalled"));
  return d;
}
function tile(value, key) {
  const t = el("div", "tile");
  t.appendChild(el("div", "v", value));
  t.appendChild(el("div", "k", key));
  return t;
}
function render(s) {
  document.getElementById("sched-version").textContent = "version " + s.scheduler.version;
  document.getElementById("sched-address").textContent = s.scheduler.address;
  document.getElementById("sched-uptime").textContent =
    "up " + duration(s.scheduler.uptime_seconds);
  const c = s.counters;
  let total = 0;
  for (const w of s.workers) total += w.throughput_bytes_per_second;
  document.getElementById("tiles").replaceChildren(
    tile(s.workers.length, "workers"), tile(s.jobs.length, "jobs running"),
    tile(s.tasks.queued + " / " + s.tasks.running, "tasks queued / running"),
    tile(rate(total), "throughput"), tile(bytes(c.bytes_reduced), "reduced"),
    tile(c.jobs_completed + " / " + c.jobs_failed + " / " + c.jobs_cancelled,
         "jobs done / failed / cancelled"),
    tile(s.verify.mismatches + " / " + s.verify.chunks, "verify: suspect copies / chunks compared"));
  fill("workers", s.workers.map(w => {
    const used = w.memory_used_bytes, total = w.memory_total_bytes;
    const mem = used === null ? el("span", "small", "– / " + bytes(total))
      : progress(total ? used / total : 0, bytes(used) + " / " + bytes(total), "mem");
    const util = w.utilisation === null ? el("span", "small", "unknown")
      : progress(w.utilisation, (w.utilisation * 100).toFixed(0) + "%", "util");
    const backend = w.backend + (w.backend === "cpu" ? " ×" + w.threads : "") +
      (w.compute_capability ? " sm " + w.compute_capability : "");
    return row([workerName(w), w.host, backend, w.device, mem, util,
      {cls: "num", text: w.tasks_in_flight + " / " + w.slots},
      {cls: "num", text: w.chunks_done}, {cls: "num", text: rate(w.throughput_bytes_per_second)},
      {cls: "num", text: w.verify_mismatches}]);
  }));
  lanes = s.workers.map(w => ({id: w.id, name: w.name, slow: w.slow}));
  fill("gpus", s.workers.filter(w => w.gpu).map(w => {
    const g = w.gpu, mem = g.memory_total_bytes ? g.memory_used_bytes / g.memory_total_bytes : 0;
    const warn = el("span", g.warnings.length ? "bad" : "small",
                    g.warnings.length ? g.warnings.join("; ") : "none");
    const clock = {cls: "num" + (g.sm_clock_max_mhz && g.sm_clock_mhz < 0.9 * g.sm_clock_max_mhz &&
                                  g.sm_utilisation_pct > 50 ? " warn" : ""),
                   text: g.sm_clock_mhz.toFixed(0) + " / " + g.sm_clock_max_mhz + " MHz"};
    return row([workerName(w),
      {cls: "small", text: g.uuid + " @ " + g.pci_bus_id},
      progress(g.sm_utilisation_pct / 100, g.sm_utilisation_pct.toFixed(0) + "% / " +
               g.mem_utilisation_pct.toFixed(0) + "%", "util"),
      progress(mem, bytes(g.memory_used_bytes) + " / " + bytes(g.memory_total_bytes), "mem"),
      clock,
      {cls: "num" + (g.temperature_c >= 85 ? " bad" : g.temperature_c >= 80 ? " warn" : ""),
       text: g.temperature_c + " °C"},
      {cls: "num", text: g.power_watts.toFixed(0) + " / " + g.power_limit_watts.toFixed(0) + " W"},
      {cls: "num" + (g.ecc_uncorrected > 0 ? " bad" : g.ecc_corrected > 0 ? " warn" : ""),
       text: g.ecc_supported ? g.ecc_corrected + " / " + g.ecc_uncorrected : "off"},
      {cls: g.pcie_width && g.pcie_width < g.pcie_max_width ? "warn" : "",
       text: g.pcie_generation ? "gen" + g.pcie_generation + " x" + g.pcie_width + " of x" +
                                 g.pcie_max_width : "–"},
      w.cpu_affinity || "–", warn]);
  }));
  // A row per GPU of each burn; the burn's cell (client, time, cluster verdict) on its first row.
  const verdictCls = v => "verdict " + (v === "fail" ? "bad" : v === "warn" ? "warn" : "pass");
  fill("burns", (s.burns || []).flatMap(b => b.gpus.map((g, i) => {
    const burn = el("div");
    if (i === 0) {
      burn.appendChild(el("strong", null, b.client));
      burn.appendChild(el("span", verdictCls(b.verdict), " " + b.verdict));
      burn.appendChild(progress(b.total_seconds ? b.elapsed_seconds / b.total_seconds : 0,
                                duration(b.elapsed_seconds) + " / " + duration(b.total_seconds)));
    }
    return row([burn, g.worker + (g.gone ? " (gone)" : ""), {cls: verdictCls(g.verdict), text: g.verdict},
      {cls: "num", text: rate(g.bytes_per_second)}, {cls: "num", text: g.chunks},
      {cls: "num", text: g.mismatches}, {cls: "per small", text: g.reason || "–"}]);
  })));
  fill("jobs", s.jobs.map(j => {
    const per = el("div", "small");
    for (const p of j.per_worker)
      per.appendChild(el("div", null, p.worker + ": " + rate(p.throughput_bytes_per_second) +
                                      " (" + p.chunks_done + " chunks)"));
    if (!j.per_worker.length) per.textContent = "–";
    return row([jobCell(j), j.client,
      progress(j.progress, (j.progress * 100).toFixed(1) + "%"),
      {cls: "num", text: j.chunks_done + " / " + j.chunks},
      {cls: "num", text: duration(j.seconds)},
      {cls: "num", text: rate(j.throughput_bytes_per_second)}, {cls: "per", node: per}]);
  }));
  fill("recent", s.recent_jobs.map(j => row([jobCell(j, j.message),
      {cls: "state " + j.state, text: j.state}, j.client,
      progress(j.progress, j.chunks_done + " / " + j.chunks, j.state),
      {cls: "num", text: j.seconds.toFixed(3)},
      {cls: "num", text: rate(j.throughput_bytes_per_second)},
      {cls: "num", text: j.workers},
      {cls: "num", text: j.state !== "done" ? "–" : String(j.sum) +
          (j.var !== undefined ? " (var " + String(j.var) + ", std " + String(j.std) + ")" : "")}])));
}
async function refresh() {
  const conn = document.getElementById("conn");
  try {
    const r = await fetch("api/status?devices=0", {cache: "no-store"});
    if (!r.ok) throw new Error("HTTP " + r.status);
    render(await r.json());
    conn.textContent = "live";
    conn.className = "up";
  } catch (e) {
    conn.textContent = "scheduler unreachable";
    conn.className = "down";
  }
  setTimeout(refresh, 1000);
}
let lanes = [], streamNow = 0;
async function refreshStream() {
  try {
    const r = await fetch("api/task-stream?since=" + Math.max(0, streamNow - 30), {cache: "no-store"});
    if (r.ok) {
      const t = await r.json();
      const t1 = streamNow = t.now, t0 = Math.max(0, t1 - 30);
      drawLanes(document.getElementById("stream"), lanes, t.segments.filter(s => s[5] >= t0), t0, t1);
    }
  } catch (e) { /* the status poll reports the connection */ }
  setTimeout(refreshStream, 1000);
}
refresh();
refreshStream();
</script>
</body>
</html>
)PSCHED_PAGE";

// The page as served: kDashboardPage with the task stream's drawing code in place.
inline const std::string& dashboard_page() {
  static const std::string page = [] {
    std::string p(kDashboardPage);
    const std::string_view marker = "/*TASK_LANES_JS*/";
    p.replace(p.find(marker), marker.size(), kTaskLanesJs);
    return p;
  }();
  return page;
}

}  // namespace psched
