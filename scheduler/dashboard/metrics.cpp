#include "scheduler/dashboard/metrics.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <map>

#include "scheduler/scheduler.h"

namespace psched {

namespace {

// Prometheus label values must be UTF-8 with \, " and newline escaped. Names come from peers,
// so bytes that are not valid UTF-8 become '?' rather than a scrape Prometheus refuses.
std::string label_value(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size();) {
    const unsigned char c = static_cast<unsigned char>(in[i]);
    size_t len = c < 0x80            ? 1
                 : (c >> 5) == 0x6   ? 2
                 : (c >> 4) == 0xe   ? 3
                 : (c >> 3) == 0x1e  ? 4
                                     : 0;  // a stray continuation byte or worse
    for (size_t k = 1; len && k < len; ++k)
      if (i + k >= in.size() || (static_cast<unsigned char>(in[i + k]) >> 6) != 0x2) len = 0;
    if (len == 0) {
      out += '?';
      ++i;
      continue;
    }
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out.append(in, i, len);
    i += len;
  }
  return out;
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

// Builds the exposition text one metric family at a time: HELP and TYPE, then its samples. Written
// in place (a sample per worker per family: megabytes for thousands of workers), with room for what
// the last scrape took.
class Exposition {
 public:
  Exposition() { out_.reserve(last_bytes_ + last_bytes_ / 8); }
  void family(const char* name, const char* type, const char* help) {
    fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(const std::string& name, const std::string& labels, double value) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      out_ += labels;
      out_ += '}';
    }
    out_ += ' ';
    if (std::isfinite(value)) {
      fmt::format_to(std::back_inserter(out_), "{}", value);
    } else {
      out_ += number(value);
    }
    out_ += '\n';
  }
  void sample(const std::string& name, const std::string& labels, uint64_t value) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      out_ += labels;
      out_ += '}';
    }
    fmt::format_to(std::back_inserter(out_), " {}\n", value);
  }
  std::string take() {
    last_bytes_ = out_.size();
    return std::move(out_);
  }

 private:
  std::string out_;
  static inline thread_local size_t last_bytes_ = 0;
};

void histogram(Exposition& e, const ChunkSecondsHistogram& h) {
  e.family("psched_chunk_seconds", "histogram",
           "Backend compute seconds per chunk (each chunk of a result batch counts at the batch's "
           "average).");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.kBounds.size(); ++i) {
    cumulative += h.in_bucket[i];
    e.sample("psched_chunk_seconds_bucket", fmt::format("le=\"{}\"", number(h.kBounds[i])),
             cumulative);
  }
  e.sample("psched_chunk_seconds_bucket", "le=\"+Inf\"", h.count);
  e.sample("psched_chunk_seconds_sum", "", h.sum_seconds);
  e.sample("psched_chunk_seconds_count", "", h.count);
}

// A metric family with one sample per worker, read from a Source (the worker, its GPU health).
template <typename Source>
struct Family {
  const char* name;
  const char* type;
  const char* help;
  double (*value)(const Source&);
};

void worker_families(Exposition& e, const Scheduler& s) {
  // worker and id together: names are chosen by workers and need not be unique.
  std::map<WorkerId, std::string> labels;
  for (const auto& [id, w] : s.workers())
    labels[id] = fmt::format("worker=\"{}\",id=\"{}\"", label_value(w->name), id);

  e.family("psched_worker_info", "gauge",
           "One per connected worker: its host, backend and device.");
  for (const auto& [id, w] : s.workers())
    e.sample("psched_worker_info",
             fmt::format("{},host=\"{}\",backend=\"{}\",device=\"{}\"", labels[id],
                         label_value(w->host), label_value(w->backend),
                         label_value(w->device_name)),
             uint64_t{1});

  static const Family<WorkerRecord> kFamilies[] = {
      {"psched_worker_memory_used_bytes", "gauge",
       "Device memory in use as the worker last reported it (0: not reported).",
       [](const WorkerRecord& w) { return double(w.memory_used_bytes); }},
      {"psched_worker_memory_total_bytes", "gauge", "Device (or host, for CPU workers) memory.",
       [](const WorkerRecord& w) { return double(w.memory_total_bytes); }},
      {"psched_worker_memory_limit_bytes", "gauge", "The worker's --memory-limit (0: none).",
       [](const WorkerRecord& w) { return double(w.memory_limit_bytes); }},
      {"psched_worker_tasks_in_flight", "gauge", "Chunks assigned to the worker and not yet back.",
       [](const WorkerRecord& w) { return double(w.in_flight.size()); }},
      {"psched_worker_task_slots", "gauge", "The worker's task window.",
       [](const WorkerRecord& w) { return double(w.slots); }},
      {"psched_worker_chunks_done_total", "counter", "Chunks the worker reduced.",
       [](const WorkerRecord& w) { return double(w.chunks_done); }},
      {"psched_worker_bytes_reduced_total", "counter", "Array bytes the worker reduced.",
       [](const WorkerRecord& w) { return double(w.bytes_reduced); }},
      {"psched_worker_busy_seconds_total", "counter",
       "Backend compute seconds the worker reported.",
       [](const WorkerRecord& w) { return w.busy_seconds; }},
  };
  for (const auto& g : kFamilies) {
    e.family(g.name, g.type, g.help);
    for (const auto& [id, w] : s.workers()) e.sample(g.name, labels[id], g.value(*w));
  }
}

// Verify (scheduler/verify.h): mismatches are counted per worker name and kept after the worker
// leaves, so a GPU that computed wrong stays on record for the next scrape.
void verify_families(Exposition& e, const SchedulerCounters& c) {
  e.family("psched_verify_chunks_total", "counter",
           "Chunks computed on two (or three) workers and compared bit for bit (verify jobs).");
  e.sample("psched_verify_chunks_total", "", c.verify_chunks);
  e.family("psched_verify_mismatches_total", "counter",
           "Verified chunks whose copy from this worker was a suspect: the odd one out of three, or "
           "one of two copies that differ.");
  for (const auto& [name, n] : c.verify_mismatches)
    e.sample("psched_verify_mismatches_total", fmt::format("worker=\"{}\"", label_value(name)), n);
}

// psched_worker_slow and, per worker with NVML, psched_gpu_* labelled by worker, id, the GPU's
// uuid and host. Workers without NVML have no psched_gpu_* samples at all (absent, not 0).
void gpu_families(Exposition& e, const Scheduler& s) {
  e.family("psched_worker_slow", "gauge",
           "1 when the worker is a straggler in the newest job it worked on: its throughput is 10% "
           "or more below the job's median.");
  const std::set<WorkerId> slow = s.job_devices().slow_workers();
  for (const auto& [id, w] : s.workers())
    e.sample("psched_worker_slow", fmt::format("worker=\"{}\",id=\"{}\"", label_value(w->name), id),
             uint64_t(slow.count(id)));

  static const Family<GpuHealth> kFamilies[] = {
      {"psched_gpu_sm_utilisation_ratio", "gauge",
       "Share of time a kernel ran (NVML utilisation.gpu), mean over the last heartbeat.",
       [](const GpuHealth& h) { return h.sm_utilisation_pct / 100; }},
      {"psched_gpu_memory_utilisation_ratio", "gauge",
       "Share of time device memory was read or written (NVML utilisation.memory).",
       [](const GpuHealth& h) { return h.mem_utilisation_pct / 100; }},
      {"psched_gpu_memory_used_bytes", "gauge", "Device memory in use, every process.",
       [](const GpuHealth& h) { return double(h.memory_used_bytes); }},
      {"psched_gpu_memory_total_bytes", "gauge", "Device memory.",
       [](const GpuHealth& h) { return double(h.memory_total_bytes); }},
      {"psched_gpu_sm_clock_hertz", "gauge", "SM clock, mean over the last heartbeat.",
       [](const GpuHealth& h) { return h.sm_clock_mhz * 1e6; }},
      {"psched_gpu_sm_clock_max_hertz", "gauge", "The device's maximum SM clock.",
       [](const GpuHealth& h) { return h.sm_clock_max_mhz * 1e6; }},
      {"psched_gpu_temperature_celsius", "gauge", "GPU temperature, highest over the last heartbeat.",
       [](const GpuHealth& h) { return double(h.temperature_c); }},
      {"psched_gpu_power_watts", "gauge", "Power draw, mean over the last heartbeat.",
       [](const GpuHealth& h) { return h.power_watts; }},
      {"psched_gpu_power_limit_watts", "gauge", "Enforced power limit.",
       [](const GpuHealth& h) { return h.power_limit_watts; }},
      {"psched_gpu_throttle_reasons", "gauge",
       "NVML clock throttle reason bits seen over the last heartbeat (0: none).",
       [](const GpuHealth& h) { return double(h.throttle_reasons); }},
      {"psched_gpu_throttled", "gauge",
       "1 when a reason that slows a busy GPU (power cap, thermal, hardware slowdown) was seen.",
       [](const GpuHealth& h) { return (h.throttle_reasons & throttle::kSlowing) ? 1.0 : 0.0; }},
      {"psched_gpu_ecc_corrected_errors", "gauge",
       "Corrected ECC errors since the driver loaded (volatile count).",
       [](const GpuHealth& h) { return double(h.ecc_corrected); }},
      {"psched_gpu_ecc_uncorrected_errors", "gauge",
       "Uncorrected ECC errors since the driver loaded (volatile count).",
       [](const GpuHealth& h) { return double(h.ecc_uncorrected); }},
      {"psched_gpu_pcie_link_generation", "gauge", "Current PCIe link generation.",
       [](const GpuHealth& h) { return double(h.pcie_generation); }},
      {"psched_gpu_pcie_link_width", "gauge", "Current PCIe link width (lanes).",
       [](const GpuHealth& h) { return double(h.pcie_width); }},
      {"psched_gpu_pcie_link_max_width", "gauge", "Widest PCIe link the GPU can train to.",
       [](const GpuHealth& h) { return double(h.pcie_max_width); }},
  };
  std::map<WorkerId, std::string> labels;
  for (const auto& [id, w] : s.workers())
    if (w->gpu)
      labels[id] = fmt::format("worker=\"{}\",id=\"{}\",uuid=\"{}\",host=\"{}\"", label_value(w->name),
                               id, label_value(w->gpu->uuid), label_value(w->host));
  for (const auto& g : kFamilies) {
    e.family(g.name, g.type, g.help);
    for (const auto& [id, w] : s.workers())
      if (w->gpu) e.sample(g.name, labels[id], g.value(*w->gpu));
  }
}

// What the scheduler is and who is connected.
void scheduler_families(Exposition& e, const Scheduler& s) {
  e.family("psched_build_info", "gauge", "The scheduler's version and protocol version.");
  e.sample("psched_build_info",
           fmt::format("version=\"{}\",protocol=\"{}\"", PSCHED_VERSION, wire::PROTOCOL_VERSION),
           uint64_t{1});
  e.family("psched_uptime_seconds", "gauge", "Seconds since the scheduler started.");
  e.sample("psched_uptime_seconds", "",
           std::chrono::duration<double>(std::chrono::steady_clock::now() - s.started()).count());
  e.family("psched_workers", "gauge", "Workers connected.");
  e.sample("psched_workers", "", uint64_t(s.workers().size()));
  e.family("psched_clients", "gauge", "Clients connected.");
  e.sample("psched_clients", "", uint64_t(s.clients().size()));
  e.family("psched_client_unsent_bytes", "gauge",
           "Bytes held in send buffers for clients, all together (at most about --max-total-unsent).");
  e.sample("psched_client_unsent_bytes", "", uint64_t(s.client_unsent_bytes()));
}

// Jobs and their chunk tasks, now and in all.
void job_families(Exposition& e, const Scheduler& s, const SchedulerCounters& c) {
  e.family("psched_jobs_running", "gauge", "Jobs accepted and not yet finished.");
  e.sample("psched_jobs_running", "", uint64_t(s.jobs().size()));
  e.family("psched_jobs_submitted_total", "counter", "Jobs accepted.");
  e.sample("psched_jobs_submitted_total", "", c.jobs_submitted);
  e.family("psched_jobs_total", "counter", "Jobs finished, by how they ended.");
  e.sample("psched_jobs_total", "state=\"done\"", c.jobs_completed);
  e.sample("psched_jobs_total", "state=\"failed\"", c.jobs_failed);
  e.sample("psched_jobs_total", "state=\"cancelled\"", c.jobs_cancelled);

  uint64_t queued = 0, running = 0;
  for (const auto& [id, job] : s.jobs()) queued += job->queued() + job->verify.queued();
  for (const auto& [id, w] : s.workers()) running += w->in_flight.size();
  e.family("psched_tasks", "gauge", "Chunk tasks of running jobs, by state.");
  e.sample("psched_tasks", "state=\"queued\"", queued);
  e.sample("psched_tasks", "state=\"running\"", running);
  e.family("psched_tasks_total", "counter",
           "Chunk task events: dispatched to a worker, done, failed on a worker, re-queued, given back "
           "unstarted from a job's tail for an idle worker.");
  e.sample("psched_tasks_total", "state=\"dispatched\"", c.tasks_dispatched);
  e.sample("psched_tasks_total", "state=\"done\"", c.tasks_done);
  e.sample("psched_tasks_total", "state=\"failed\"", c.tasks_failed);
  e.sample("psched_tasks_total", "state=\"requeued\"", c.tasks_requeued);
  e.sample("psched_tasks_total", "state=\"given_back\"", c.tasks_given_back);
  e.family("psched_bytes_reduced_total", "counter", "Array bytes reduced by all workers.");
  e.sample("psched_bytes_reduced_total", "", c.bytes_reduced);
}

// What went wrong around the work: refused connections, protocol errors, stalls of the loop.
void trouble_families(Exposition& e, const Scheduler& s, const SchedulerCounters& c) {
  e.family("psched_connections_refused_total", "counter",
           "Connections refused because --max-connections were open.");
  e.sample("psched_connections_refused_total", "", c.connections_refused);
  e.family("psched_protocol_errors_total", "counter",
           "Peers disconnected for breaking the protocol (bad Hello, token, frame, message).");
  e.sample("psched_protocol_errors_total", "", c.protocol_errors);
  e.family("psched_loop_stalls_total", "counter",
           "Times the scheduler's event loop did not run for over 0.3 s (stopped, paused, starved); "
           "peers' silence is counted from each stall's end.");
  e.sample("psched_loop_stalls_total", "", s.watchdog().stalls());
  e.family("psched_loop_stalled_seconds_total", "counter",
           "Seconds the scheduler's event loop did not run, over every stall.");
  e.sample("psched_loop_stalled_seconds_total", "", s.watchdog().stalled_seconds());
}

// The running burn-ins (pbench --burn), per GPU, labelled by worker and the burn's client id: one
// burn per client connection, so two burns that share a worker stay apart.
void burn_families(Exposition& e, const Scheduler& s) {
  const auto& burns = s.burns().burns();
  e.family("psched_burns_running", "gauge", "Burn-ins (pbench --burn) reporting to the dashboard.");
  e.sample("psched_burns_running", "", uint64_t(burns.size()));
  e.family("psched_burn_gpu_verdict", "gauge",
           "A running burn-in's verdict on the worker so far: 0 pass, 1 warn, 2 fail.");
  for (const auto& [client, b] : burns)
    for (const BurnGpuStatus& g : b.status.gpus)
      e.sample("psched_burn_gpu_verdict", fmt::format("worker=\"{}\",burn=\"{}\"", label_value(g.worker), client),
               uint64_t(g.verdict));
  e.family("psched_burn_gpu_mismatches", "gauge",
           "Verify votes the worker's copy lost during a running burn-in.");
  for (const auto& [client, b] : burns)
    for (const BurnGpuStatus& g : b.status.gpus)
      e.sample("psched_burn_gpu_mismatches",
               fmt::format("worker=\"{}\",burn=\"{}\"", label_value(g.worker), client), g.mismatches);
}

}  // namespace

std::string metrics_text(const Scheduler& s) {
  const SchedulerCounters& c = s.counters();
  Exposition e;
  scheduler_families(e, s);
  job_families(e, s, c);
  trouble_families(e, s, c);
  histogram(e, c.chunk_seconds);
  verify_families(e, c);
  worker_families(e, s);
  gpu_families(e, s);
  burn_families(e, s);
  return e.take();
}

}  // namespace psched
