// A job's result as JSON: one document with one set of keys (README, "The job result as JSON"),
// written once here for pbench's --json, its --report (the report's "job") and the Python client's
// Result. A template over the output, as core/worker_info_json.h is for a worker: pbench writes a
// nlohmann document (core/json_out.h's JsonDoc), the Python module its own dicts and lists.
// Not installed: libpclient's public header says nothing of JSON.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "client/figures.h"
#include "core/worker_info_json.h"
#include "pclient/client.h"

namespace pclient {

// What the document is written from.
struct ResultJsonInput {
  const Job& job;
  const Result& result;
  double seconds = 0;  // the run's wall time (pbench --repeat: the last run's)
  // The workers just before and just after the run: "devices" lists `after` (empty when null),
  // each with its share of the run when `before` is given too.
  const std::vector<WorkerInfo>* before = nullptr;
  const std::vector<WorkerInfo>* after = nullptr;
  uint32_t ddof = 0;         // of var and std, written when the job computed the squares
  bool verify = false;       // the job was verified: "verify" says what the comparison found
  bool gpu_series = false;   // devices[].run.gpu.series: each heartbeat (the report and Python)
};

// What worker w did in a run: `before` holds the workers just before it (one that joined since
// counts from zero). busy_fraction is busy / wall per unit of compute (a CPU worker's busy time is
// summed over its threads).
struct RunShare {
  uint64_t chunks = 0;
  double busy_seconds = 0, busy_fraction = 0;
};
RunShare run_share(const WorkerInfo& w, const std::vector<WorkerInfo>& before, double seconds);

// The job as the reference table names it (core/reference_sums.h) and its source's kind.
std::string reference_key_of(const Job& job);
std::string source_name_of(const Job& job);

namespace result_json_detail {

template <typename Out>
void write_doubles(Out& out, const std::vector<double>& list) {
  out.begin_array();
  for (double d : list) out.value(d);
  out.end_array();
}

template <typename Out>
void write_figure(Out& out, const Figure& f) {
  out.begin_object();
  out.key("min").value(f.min);
  out.key("mean").value(f.mean);
  out.key("max").value(f.max);
  out.end_object();
}

// A GPU over the job: min/mean/max of its heartbeats' figures, and with `series` each heartbeat
// as [seconds, SM clock MHz, temperature C, power W, SM utilisation %] (compact for the report).
template <typename Out>
void write_gpu_over_job(Out& out, const DeviceReport& d, bool series) {
  out.begin_object();
  out.key("uuid").value(d.uuid);
  out.key("sm_clock_mhz");
  write_figure(out, d.sm_clock_mhz);
  out.key("sm_clock_max_mhz").value(d.sm_clock_max_mhz);
  out.key("temperature_c");
  write_figure(out, d.temperature_c);
  out.key("power_watts");
  write_figure(out, d.power_watts);
  out.key("sm_utilisation_pct");
  write_figure(out, d.sm_utilisation_pct);
  out.key("throttle_reasons").value(d.throttle_reasons);
  out.key("throttle").value(psched::throttle_reason_names(d.throttle_reasons));
  if (series) {
    out.key("series").begin_array();
    for (const DeviceReport::Point& p : d.series) {
      out.begin_array();
      out.value(std::round(p.seconds * 1e3) / 1e3);
      out.value(p.sm_clock_mhz).value(p.temperature_c).value(p.power_watts).value(p.sm_utilisation_pct);
      out.end_array();
    }
    out.end_array();
  }
  out.end_object();
}

// A worker's part in the job as the scheduler saw it: device_share's keys, its busy share of the
// job's time (span seconds) and its GPU over the job (null without NVML).
template <typename Out>
void write_run(Out& out, const DeviceReport& d, double span, bool series) {
  out.begin_object();
  psched::write_device_share_members(out, d);
  const double device_seconds = d.bytes_per_second > 0 ? double(d.bytes) / d.bytes_per_second : 0;
  out.key("busy_share").value(span > 0 ? device_seconds / span : 0.0);
  out.key("gpu");
  if (d.has_gpu) {
    write_gpu_over_job(out, d, series);
  } else {
    out.null();
  }
  out.end_object();
}

// The workers after the run (worker_info_json's keys), each with its share of the run by its own
// timings (run_*) and, when it took part, the scheduler's view of it ("run").
template <typename Out>
void write_devices(Out& out, const ResultJsonInput& in) {
  const Result& r = in.result;
  const double span = r.scheduler_seconds > 0 ? r.scheduler_seconds : r.wall_seconds;
  out.begin_array();
  if (in.after) {
    for (const WorkerInfo& w : *in.after) {
      out.begin_object();
      psched::write_worker_info_members(out, w);
      if (in.before && in.seconds > 0) {
        const RunShare share = run_share(w, *in.before, in.seconds);
        out.key("run_chunks").value(share.chunks);
        out.key("run_busy_seconds").value(share.busy_seconds);
        out.key("run_busy_fraction").value(share.busy_fraction);
      }
      for (const DeviceReport& d : r.devices)
        if (d.worker_id == w.id) write_run(out.key("run"), d, span, in.gpu_series);
      out.end_object();
    }
  }
  out.end_array();
}

template <typename Out>
void write_verify(Out& out, const Result& r) {
  out.begin_object();
  out.key("verified_chunks").value(r.verified_chunks);
  out.key("same_worker_chunks").value(r.same_worker_chunks);
  out.key("mismatch_count").value(r.mismatch_count);
  out.key("mismatches").begin_array();
  for (const VerifyMismatch& m : r.mismatches) {
    out.begin_object();
    out.key("chunk").value(m.chunk);
    out.key("chunks").value(m.chunks);
    out.key("note").value(m.note);
    out.key("copies").begin_array();
    for (const VerifyCopy& c : m.copies) {
      out.begin_object();
      out.key("worker_id").value(c.worker_id);
      out.key("worker").value(c.worker_name);
      out.key("device").value(c.device_name);
      out.key("sum").value(c.sum);
      out.key("count").value(c.count);
      out.key("min").value(c.min);
      out.key("max").value(c.max);
      out.key("suspect").value(c.suspect);
      write_doubles(out.key("exact_terms"), c.exact_terms);
      if (c.has_squares) write_doubles(out.key("squares_terms"), c.squares_terms);
      out.end_object();
    }
    out.end_array();
    out.end_object();
  }
  out.end_array();
  out.end_object();
}

}  // namespace result_json_detail

// The job result document (README, "The job result as JSON", lists its keys).
template <typename Out>
void write_result_json(Out& out, const ResultJsonInput& in) {
  namespace detail = result_json_detail;
  const Job& job = in.job;
  const Result& r = in.result;
  const bool stored = !job.input.path.empty();
  out.begin_object();
  out.key("job_id").value(r.job_id);
  out.key("sum").value(r.sum);
  detail::write_doubles(out.key("exact_terms"), r.exact_terms);
  out.key("count").value(r.count);
  out.key("mean");
  if (r.count > 0) {
    out.value(r.mean());
  } else {  // no mean, min or max of nothing: say so rather than print 0
    out.null();
    out.key("empty_selection").value(true);
  }
  out.key("min").value(r.min);
  out.key("max").value(r.max);
  bool ddof = false;  // the figures of their own line, each when the job computed its parts
  for (const FigureDef& f : kFigures) {
    if (f.label.empty() || !has_parts(r, f)) continue;
    out.key(f.name).value(f.value(r, in.ddof));
    ddof = ddof || f.ddof;
  }
  if (ddof) out.key("ddof").value(in.ddof);
  out.key("seconds").value(in.seconds);
  out.key("scheduler_seconds").value(r.scheduler_seconds);
  out.key("chunks").value(r.chunks);
  out.key("bytes").value(job.bytes());
  out.key("bytes_per_second").value(in.seconds > 0 ? double(job.bytes()) / in.seconds : 0.0);
  // The GPUs' energy on the job (Result::energy_joules), and per TB of the array: null without NVML.
  const double joules = r.energy_joules();
  out.key("energy_joules");
  if (joules > 0) {
    out.value(joules);
  } else {
    out.null();
  }
  out.key("joules_per_tb");
  if (joules > 0 && job.bytes() > 0) {
    out.value(joules / (double(job.bytes()) / 1e12));
  } else {
    out.null();
  }
  out.key("workers").value(r.workers);
  if (in.after) out.key("cluster_workers").value(uint64_t(in.after->size()));
  out.key("retries").value(r.retries);
  out.key("resubmissions").value(r.resubmissions);
  out.key("reference_key").value(reference_key_of(job));
  out.key("source").value(source_name_of(job));
  out.key("generator");
  if (stored) {
    out.null();
  } else {
    out.value(job.generator);
  }
  out.key("input");
  if (stored) {
    out.value(job.input.path);
  } else {
    out.null();
  }
  out.key("dtype").value(job.dtype);
  out.key("rows").value(job.rows);
  out.key("cols").value(job.cols);
  out.key("chunk_rows").value(job.chunk_rows);
  out.key("chunk_cols").value(job.chunk_cols);
  out.key("fused").value(job.fused);
  detail::write_devices(out.key("devices"), in);
  out.key("stragglers").begin_array();
  for (const DeviceReport& d : r.devices) {
    if (!d.slow) continue;
    out.begin_object();
    out.key("worker").value(d.name);
    out.key("host").value(d.host);
    out.key("cause").value(d.cause);
    out.end_object();
  }
  out.end_array();
  if (in.verify) detail::write_verify(out.key("verify"), r);
  out.end_object();
}

// The same as a nlohmann document (pbench).
nlohmann::json result_json(const ResultJsonInput& in);

}  // namespace pclient
