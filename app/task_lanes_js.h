// The task stream's drawing, in JavaScript: one lane per worker, one bar per result batch, coloured
// by job (like Dask's task stream). The one copy that both the dashboard (scheduler/dashboard/dashboard_page.h,
// live) and pbench's performance report (client/pbench/report.cpp, kept) embed inline: no external
// scripts. Names are drawn with canvas fillText, never parsed as HTML.
#pragma once

#include <string_view>

namespace psched {

// drawLanes(canvas, lanes, segments, t0, t1): lanes = [{id, name, slow}], segments =
// [[job, worker, first_chunk, chunks, start_s, end_s]], drawn over the time window [t0, t1].
inline constexpr std::string_view kTaskLanesJs = R"PSCHED_JS(
function laneColour(job) { return "hsl(" + ((job * 137) % 360) + ",62%,52%)"; }
function drawLanes(canvas, lanes, segments, t0, t1) {
  const ratio = window.devicePixelRatio || 1, laneH = 22, left = 150, axis = 18;
  const width = canvas.clientWidth || 900, height = Math.max(1, lanes.length) * laneH + axis;
  canvas.width = width * ratio; canvas.height = height * ratio;
  canvas.style.height = height + "px";
  const g = canvas.getContext("2d");
  g.scale(ratio, ratio);
  g.clearRect(0, 0, width, height);
  const ink = getComputedStyle(canvas).color || "#333";
  g.font = "12px system-ui, sans-serif";
  g.textBaseline = "middle";
  const row = new Map();
  lanes.forEach((l, i) => {
    row.set(String(l.id), i);
    g.fillStyle = l.slow ? "#d64545" : ink;
    g.fillText((l.slow ? "⚠ " : "") + l.name, 4, i * laneH + laneH / 2, left - 8);
    g.fillStyle = "rgba(128,128,128,0.12)";
    g.fillRect(left, i * laneH + 2, width - left, laneH - 4);
  });
  const span = Math.max(t1 - t0, 1e-9), scale = (width - left - 4) / span;
  for (const s of segments) {
    const r = row.get(String(s[1]));
    if (r === undefined || s[5] < t0 || s[4] > t1) continue;
    const x0 = left + Math.max(0, s[4] - t0) * scale, x1 = left + Math.min(span, s[5] - t0) * scale;
    g.fillStyle = laneColour(s[0]);
    g.fillRect(x0, r * laneH + 3, Math.max(1, x1 - x0), laneH - 6);
  }
  g.fillStyle = ink;
  const y = lanes.length * laneH + axis / 2;
  for (let k = 0; k <= 4; k++) {
    const t = t0 + span * k / 4;
    g.fillText(t.toFixed(span < 10 ? 2 : 1) + " s", left + (width - left - 40) * k / 4, y);
  }
}
)PSCHED_JS";

}  // namespace psched
