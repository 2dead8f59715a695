#include "burn_ledger.h"

#include <fmt/format.h>

#include <algorithm>
#include <regex>

#include "app/exit_codes.h"
#include "core/gpu_health.h"

namespace pbench {

namespace {

// A burn of hours on a big fleet: each GPU keeps at most this many points (older halves thinned).
constexpr size_t kMaxSeriesPoints = 2000;
// Mismatches listed in full; more are counted (a GPU that computes everything wrong).
constexpr size_t kMaxMismatches = 1000;
// Failures listed per GPU, and events in all: enough to see the pattern, bounded for a long burn.
constexpr size_t kMaxFailuresListed = 10;
constexpr size_t kMaxEvents = 1000;
// Throughput is judged only for a GPU that took part this long: a burn cut after a fraction of a
// second holds a few milliseconds of work per GPU, where scheduling noise alone is 20%. (Not its
// compute time: with a slow GPU holding every job back, the fast ones compute little.)
constexpr double kMinSecondsToJudge = 2;
// Throttle reasons that are no fault of the GPU's: idle, clocks as set, and power capping, which a
// GPU at full load does by design.
constexpr uint64_t kExpectedThrottle =
    psched::throttle::kGpuIdle | psched::throttle::kApplicationsClocksSetting | psched::throttle::kSwPowerCap;

std::string chunks_text(const pclient::VerifyMismatch& m) {
  return m.chunks == 1 ? fmt::format("chunk {}", m.chunk) : fmt::format("chunks {} to {}", m.chunk, m.chunk + m.chunks - 1);
}

}  // namespace

const char* verdict_name(pclient::BurnVerdict v) {
  switch (v) {
    case pclient::BurnVerdict::kPass: return "pass";
    case pclient::BurnVerdict::kWarn: return "warn";
    case pclient::BurnVerdict::kFail: return "fail";
  }
  return "fail";
}

double BurnGpu::present_seconds() const {
  return std::max(0.0, (left_seconds >= 0 ? left_seconds : last_seen_seconds) - joined_seconds);
}

double BurnGpu::bytes_per_second() const {
  if (busy_now - busy_at_join > 0) return double(bytes_now - bytes_at_join) / (busy_now - busy_at_join);
  const double s = present_seconds();
  return s > 0 ? double(bytes_now - bytes_at_join) / s : 0.0;
}

BurnGpu* BurnLedger::by_id(uint32_t id) {
  for (auto& [name, gpu] : gpus_)
    if (gpu.worker_id == id) return &gpu;
  return nullptr;
}

void BurnLedger::fail(BurnGpu& gpu, const std::string& why, double seconds) {
  if (gpu.failures.size() >= kMaxFailuresListed) {
    ++gpu.failures_unlisted;
    return;
  }
  gpu.failures.push_back(why);
  add_event(seconds, fmt::format("{}: {}", gpu.name, why));
}

void BurnLedger::add_event(double seconds, std::string text) {
  if (events_.size() < kMaxEvents) events_.push_back({seconds, std::move(text)});
}

void BurnLedger::observe(const std::vector<pclient::WorkerInfo>& workers, double seconds) {
  for (const pclient::WorkerInfo& w : workers) {
    auto [it, joined] = gpus_.try_emplace(w.name);
    BurnGpu& g = it->second;
    const bool back = !joined && g.left_seconds >= 0;  // a fresh process under the same name
    if (joined) {
      g.joined_seconds = seconds;
      g.bytes_at_join = w.bytes_reduced;  // what it did before the burn is not the burn's
      g.chunks_at_join = w.chunks_done;
      g.busy_at_join = w.busy_seconds;
      if (seconds > 0) add_event(seconds, fmt::format("{} joined", w.name));
    } else if (back) {
      // Its counters start again from zero: keep what it did before it left (modular arithmetic).
      g.bytes_at_join = w.bytes_reduced - (g.bytes_now - g.bytes_at_join);
      g.chunks_at_join = w.chunks_done - (g.chunks_now - g.chunks_at_join);
      g.busy_at_join = w.busy_seconds - (g.busy_now - g.busy_at_join);
      g.left_seconds = -1;
      add_event(seconds, fmt::format("{} joined again", w.name));
    }
    const double dt = seconds - g.last_seen_seconds;
    const double rate = !joined && !back && dt > 0 && w.bytes_reduced >= g.bytes_now
                            ? double(w.bytes_reduced - g.bytes_now) / dt : 0.0;
    g.worker_id = w.id;
    g.name = w.name;
    g.host = w.host;
    g.device = w.device_name;
    g.bytes_now = w.bytes_reduced;
    g.chunks_now = w.chunks_done;
    g.busy_now = w.busy_seconds;
    g.last_seen_seconds = seconds;
    BurnGpu::Point p{seconds, rate, 0, 0, 0};
    if (w.gpu) {
      const pclient::GpuHealth& h = *w.gpu;
      if (!g.has_gpu || (h.ecc_supported && !g.ecc_seen)) {
        g.ecc_seen = h.ecc_supported;
        g.ecc_uncorrected_start = h.ecc_uncorrected;
      }
      g.has_gpu = true;
      g.uuid = h.uuid;
      if (h.ecc_supported && h.ecc_uncorrected > g.ecc_uncorrected_now && h.ecc_uncorrected > g.ecc_uncorrected_start)
        add_event(seconds, fmt::format("{}: ECC uncorrected errors {} (were {} at the start)", g.name,
                                                h.ecc_uncorrected, g.ecc_uncorrected_start));
      g.ecc_uncorrected_now = std::max(g.ecc_uncorrected_now, h.ecc_uncorrected);
      // The best generation seen: an idle GPU drops its link to a lower generation to save power,
      // so only a link that never reached its maximum while the burn kept it busy is a fault.
      g.pcie_generation = std::max(g.pcie_generation, h.pcie_generation);
      g.pcie_max_generation = std::max(g.pcie_max_generation, h.pcie_max_generation);
      if (h.pcie_max_width > 0 && (g.pcie_max_width == 0 || h.pcie_width < g.pcie_width)) g.pcie_width = h.pcie_width;
      g.pcie_max_width = std::max(g.pcie_max_width, h.pcie_max_width);
      auto note = [&](RisingCount& count, uint64_t figure, const char* what) {
        if (count.note(figure))
          add_event(seconds, fmt::format("{}: {} {} (were {} at the start)", g.name, what, figure, count.start));
      };
      if (h.remap_supported) {
        note(g.remapped_rows, uint64_t(h.remapped_rows_corrected) + h.remapped_rows_uncorrected, "remapped rows");
        g.remap_pending = g.remap_pending || h.remap_pending;
        g.remap_failed = g.remap_failed || h.remap_failed;
      }
      if (h.retired_supported) {
        note(g.retired_pages, uint64_t(h.retired_pages_sbe) + h.retired_pages_dbe, "retired memory pages");
        g.retired_pending = g.retired_pending || h.retired_pending;
      }
      g.max_temperature_c = std::max(g.max_temperature_c, h.temperature_c);
      g.throttle_reasons |= h.throttle_reasons;
      g.last_health = h;
      p.sm_clock_mhz = h.sm_clock_mhz;
      p.temperature_c = h.temperature_c;
      p.power_watts = h.power_watts;
    }
    g.series.push_back(p);
    if (g.series.size() > kMaxSeriesPoints) {
      std::vector<BurnGpu::Point> thinned;
      for (size_t i = 0; i < g.series.size(); i += 2) thinned.push_back(g.series[i]);
      g.series = std::move(thinned);
    }
  }
  for (auto& [name, g] : gpus_) {
    if (g.left_seconds >= 0) continue;
    const bool listed = std::any_of(workers.begin(), workers.end(),
                                    [&](const pclient::WorkerInfo& w) { return w.name == name; });
    if (listed) continue;
    g.left_seconds = seconds;
    std::string words = g.last_words.empty()
                            ? "gone from psched's workers without a word (killed, crashed or cut off while it held "
                              "no chunk of a running job)"
                            : g.last_words;
    if (g.has_gpu) {
      const std::vector<std::string> warnings = psched::gpu_warnings(g.last_health);
      words += fmt::format("; its last heartbeat: {:.0f} MHz, {} C, {:.0f} W{}{}", g.last_health.sm_clock_mhz,
                           g.last_health.temperature_c, g.last_health.power_watts, warnings.empty() ? "" : ", ",
                           fmt::join(warnings, ", "));
    }
    g.last_words = words;
    fail(g, fmt::format("left the cluster {:.1f} s into the burn: {}", seconds, words), seconds);
  }
}

void BurnLedger::note_result(const pclient::Result& result, const std::string& job_text) {
  mismatch_count_ += result.mismatch_count;
  for (const pclient::VerifyMismatch& m : result.mismatches) {
    if (mismatches_.size() < kMaxMismatches) mismatches_.push_back({result.job_id, job_text, m});
    size_t suspects = 0;
    for (const auto& c : m.copies) suspects += c.suspect ? 1 : 0;
    for (const auto& c : m.copies) {
      if (!c.suspect) continue;
      auto it = gpus_.find(c.worker_name);
      if (it == gpus_.end()) continue;  // never listed: too short-lived to be seen (its id says nothing now)
      ++it->second.mismatches;
      std::string others;
      for (const auto& o : m.copies)
        if (&o != &c) others += fmt::format("{}'{}' {:.17g}", others.empty() ? "" : ", ", o.worker_name, o.sum);
      const std::string why =
          suspects == 1
              ? fmt::format("job {} ({}), {}: its copy lost the vote (sum {:.17g}; {})", result.job_id, job_text,
                            chunks_text(m), c.sum, others)
              : fmt::format("job {} ({}), {}: its copy differs (sum {:.17g}; {}) and no third GPU broke the tie",
                            result.job_id, job_text, chunks_text(m), c.sum, others);
      fail(it->second, why, it->second.last_seen_seconds);
    }
  }
}

void BurnLedger::note_notice(const std::string& notice, double seconds) {
  // The scheduler's notices about one worker open with "worker ID 'NAME'" (stalls.cpp, results.cpp).
  static const std::regex about_worker(R"(^worker (\d+) '([^']*)' (.*)$)");
  std::smatch m;
  if (std::regex_match(notice, m, about_worker)) {
    BurnGpu* gpu = by_id(uint32_t(std::stoul(m[1].str())));
    if (!gpu) {
      auto it = gpus_.find(m[2].str());
      if (it != gpus_.end()) gpu = &it->second;
    }
    // A stall is slowness, not a fault (psched judges it from the stall's end); the rest fail it.
    const bool stalled = m[3].str().rfind("stalled", 0) == 0;
    if (gpu && !stalled) {
      gpu->last_words = m[3].str();
      fail(*gpu, m[3].str(), seconds);
      return;
    }
  }
  add_event(seconds, notice);
}

void BurnLedger::note_process_exit(const std::string& name, const std::string& how, double seconds) {
  auto it = gpus_.find(name);
  if (it == gpus_.end()) {  // never listed: it died before the first look
    add_event(seconds, fmt::format("{}: {}", name, how));
    return;
  }
  BurnGpu& g = it->second;
  g.last_words = g.last_words.empty() ? how : fmt::format("{}; psched: {}", how, g.last_words);
  fail(g, how, seconds);
}

void BurnLedger::note_job_error(const std::string& error, double seconds) {
  cluster_failures_.push_back(fmt::format("{:.1f} s: {}", seconds, error));
  add_event(seconds, error);
}

double BurnLedger::median_of_model(const std::string& device) const {
  std::vector<double> rates;
  for (const auto& [name, g] : gpus_)
    if (g.device == device && g.present_seconds() >= kMinSecondsToJudge && g.chunks_now > g.chunks_at_join)
      rates.push_back(g.bytes_per_second());
  if (rates.empty()) return 0;
  std::sort(rates.begin(), rates.end());
  const size_t n = rates.size();
  return n % 2 ? rates[n / 2] : (rates[n / 2 - 1] + rates[n / 2]) / 2;
}

GpuVerdict BurnLedger::verdict_of(const BurnGpu& g) const {
  GpuVerdict v;
  v.failures = g.failures;
  if (g.failures_unlisted > 0) v.failures.push_back(fmt::format("... and {} more failures", g.failures_unlisted));
  if (g.ecc_seen && g.ecc_uncorrected_now > g.ecc_uncorrected_start)
    v.failures.push_back(fmt::format("ECC uncorrected errors rose from {} to {} during the burn",
                                     g.ecc_uncorrected_start, g.ecc_uncorrected_now));
  if (g.pcie_max_width > 0 && g.pcie_width > 0 && g.pcie_width < g.pcie_max_width)
    v.failures.push_back(fmt::format("PCIe link x{} of x{} (gen {})", g.pcie_width, g.pcie_max_width, g.pcie_generation));
  auto rose = [&](const RisingCount& count, const char* what) {
    if (count.rose())
      v.failures.push_back(fmt::format("{} rose from {} to {} during the burn", what, count.start, count.now));
  };
  rose(g.remapped_rows, "remapped memory rows");
  if (g.remap_pending) v.failures.push_back("a memory row remap is pending (the GPU needs a reset)");
  if (g.remap_failed) v.failures.push_back("a memory row remap failed");
  rose(g.retired_pages, "retired memory pages");
  if (g.retired_pending) v.failures.push_back("a memory page retirement is pending (the driver must reload)");
  // Judged once the GPU has worked (so its link had reason to train up); 0 on either side: unknown.
  if (g.pcie_max_generation > 0 && g.pcie_generation > 0 && g.pcie_generation < g.pcie_max_generation &&
      g.chunks_now > g.chunks_at_join)
    v.failures.push_back(fmt::format("PCIe link gen {} of gen {} under load (the best seen during the burn)",
                                     g.pcie_generation, g.pcie_max_generation));
  v.median_bytes_per_second = median_of_model(g.device);
  const double rate = g.bytes_per_second();
  const bool judged = g.left_seconds < 0 && g.present_seconds() >= kMinSecondsToJudge;
  if (judged && g.chunks_now == g.chunks_at_join)
    v.warnings.push_back(fmt::format("did no work in {:.1f} s", g.present_seconds()));
  else if (judged && v.median_bytes_per_second > 0 && rate < limits_.slow_fraction * v.median_bytes_per_second)
    v.warnings.push_back(fmt::format("slow: {:.0f}% of the median of its model ({:.3g} of {:.3g} MB/s; limit {:.0f}%)",
                                     100 * rate / v.median_bytes_per_second, rate / 1e6,
                                     v.median_bytes_per_second / 1e6, 100 * limits_.slow_fraction));
  if (const std::string t = psched::throttle_reason_names(g.throttle_reasons & ~kExpectedThrottle); !t.empty())
    v.warnings.push_back("throttled: " + t);
  if (g.has_gpu && g.max_temperature_c > limits_.temperature_limit_c)
    v.warnings.push_back(fmt::format("hot: {} C (limit {:.0f} C)", g.max_temperature_c, limits_.temperature_limit_c));
  v.verdict = !v.failures.empty() ? pclient::BurnVerdict::kFail : !v.warnings.empty() ? pclient::BurnVerdict::kWarn : pclient::BurnVerdict::kPass;
  return v;
}

pclient::BurnVerdict BurnLedger::cluster_verdict() const {
  pclient::BurnVerdict worst = cluster_failures_.empty() && !gpus_.empty() ? pclient::BurnVerdict::kPass : pclient::BurnVerdict::kFail;
  for (const auto& [name, g] : gpus_) worst = std::max(worst, verdict_of(g).verdict);
  return worst;
}

namespace {

// One line within the wire's bound on a reason (512 bytes, core/burn_status.h), cut at a character.
std::string reason_line(std::string text) {
  constexpr size_t kMaxReasonBytes = 500;
  for (char& c : text)
    if ((unsigned char)c < 0x20 || c == 0x7f) c = ' ';
  if (text.size() <= kMaxReasonBytes) return text;
  size_t cut = kMaxReasonBytes;
  while (cut > 0 && ((unsigned char)text[cut] & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
  return text.substr(0, cut) + "...";
}

}  // namespace

pclient::BurnStatus BurnLedger::status(double seconds, double total_seconds) const {
  pclient::BurnStatus out;
  out.verdict = cluster_verdict();
  out.elapsed_seconds = seconds;
  out.total_seconds = total_seconds;
  constexpr size_t kMaxGpusShown = 4096;  // the wire's bound (core/burn_status.h)
  for (const auto& [name, g] : gpus_) {
    if (out.gpus.size() == kMaxGpusShown) break;
    const GpuVerdict v = verdict_of(g);
    pclient::BurnGpuStatus& s = out.gpus.emplace_back();
    s.worker = name;
    s.verdict = v.verdict;
    if (!v.failures.empty()) s.reason = reason_line(v.failures.front());
    else if (!v.warnings.empty()) s.reason = reason_line(v.warnings.front());
    s.bytes_per_second = g.bytes_per_second();
    s.chunks = g.chunks_now - g.chunks_at_join;
    s.mismatches = g.mismatches;
    s.gone = g.left_seconds >= 0;
  }
  return out;
}

int burn_exit_code(pclient::BurnVerdict cluster) {
  switch (cluster) {
    case pclient::BurnVerdict::kPass: return psched::kExitOk;
    case pclient::BurnVerdict::kWarn: return psched::kExitBurnWarnings;
    case pclient::BurnVerdict::kFail: break;
  }
  return psched::kExitFailure;
}

}  // namespace pbench
