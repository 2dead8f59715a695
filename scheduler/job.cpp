#include "scheduler/job.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "core/check.h"

namespace psched {

namespace {

// Freed Jobs' memory, per thread: plain storage, valid until the thread's storage goes, so a Job
// freed late in a thread's exit (after RecycledJobs ran) is still handled (freed outright).
thread_local void* recycled_jobs[Job::kRecycled];
thread_local size_t recycled_count = 0;
thread_local bool recycling_over = false;

// Frees what is kept when the thread ends (made on a thread's first Job).
struct RecycledJobs {
  ~RecycledJobs() {
    for (size_t i = 0; i < recycled_count; ++i) ::operator delete(recycled_jobs[i]);
    recycled_count = 0;
    recycling_over = true;
  }
};
thread_local RecycledJobs recycled_jobs_owner;

}  // namespace

void* Job::operator new(size_t bytes) {
  (void)&recycled_jobs_owner;  // made now, so its destructor runs when the thread ends
  if (bytes == sizeof(Job) && recycled_count > 0) return recycled_jobs[--recycled_count];
  return ::operator new(bytes);
}

void Job::operator delete(void* p, size_t bytes) {
  if (bytes == sizeof(Job) && !recycling_over && recycled_count < kRecycled) {
    recycled_jobs[recycled_count++] = p;
    return;
  }
  ::operator delete(p);
}

namespace {

// Worker names in first-seen order, each once, with how often when more than once (a restarted
// worker keeps its name and may fail a chunk twice): "a x2, b".
std::vector<std::string> distinct(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  std::vector<size_t> times;
  for (const auto& n : names) {
    auto it = std::find(out.begin(), out.end(), n);
    if (it == out.end()) {
      out.push_back(n);
      times.push_back(1);
    } else {
      ++times[size_t(it - out.begin())];
    }
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (times[i] > 1) out[i] += fmt::format(" x{}", times[i]);
  return out;
}

}  // namespace

Job::Job(JobId id, ClientId client, std::shared_ptr<const JobSpec> spec, bool want_partials)
    : id_(id),
      client_(client),
      spec_(std::move(spec)),
      want_partials_(want_partials),
      started_(std::chrono::steady_clock::now()),
      table_(spec_->chunks()) {}

CompactPartial Job::result() const { return compact(total_); }

double Job::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

uint64_t Job::take_run(WorkerId worker, uint64_t max, uint64_t& first, bool fresh_only) {
  PSCHED_REQUIRE((fresh_only ? has_fresh() : has_ordinary()) && max > 0, id_, max, fresh_only);
  // A verify block's first copy on one worker: its copies then need only one other each.
  const ChunkRange r = table_.take(worker, max, verify.on() ? verify.block_chunks() : 0, fresh_only);
  first = r.first;
  return r.count;
}

bool Job::finish(ChunkRange r, WorkerId worker, const PartialSum& partial) {
  if (!table_.finish(r, worker)) return false;
  record(r, worker, partial);
  return true;
}

void Job::make_room(uint64_t adds) {
  if (adds_since_normalize_ + adds > kAddsBeforeNormalize) {
    total_.exact.normalize();
    if (total_.has_squares) total_.squares.normalize();
    adds_since_normalize_ = 0;
  }
  adds_since_normalize_ += adds;
}

// Chunks just done (they were running or held) with `partial`: the one place a partial joins the job.
void Job::record(ChunkRange r, WorkerId worker, const PartialSum& partial) {
  // A partial off the wire is not normalised: a frame holds at most 2^21 terms, so its digits are
  // below 2^53 in magnitude, what 2^21 adds could leave; its merge is charged as many.
  make_room(uint64_t{1} << 21);
  total_.exact.add(partial.exact);
  if (partial.has_squares) {  // a var/std job's: charged with the exact sum's adds, as many at most
    total_.has_squares = true;
    total_.squares.add(partial.squares);
  }
  record_figures(r, worker, ChunkFigures{partial.sum, partial.count, partial.min, partial.max});
  if (want_partials_) unsent_partials.emplace_back(r.first, partial);
}

void Job::record_figures(ChunkRange r, WorkerId worker, const ChunkFigures& f) {
  total_.count += f.count;
  total_.min = f.min < total_.min ? f.min : total_.min;
  total_.max = f.max > total_.max ? f.max : total_.max;
  running_sum_ += f.sum;
  done_by_[worker] += r.count;
}

void Job::finish_verified(ChunkRange block, WorkerId worker, const PartialSum& partial) {
  table_.finish_held(block);
  record(block, worker, partial);
}

bool Job::requeue(ChunkRange r, WorkerId worker, const std::string& worker_name, bool blame,
                  bool repeat_as_suspect, uint32_t limit, std::vector<ChunkRange>* at_limit) {
  if (!table_.running_here(r, worker)) return false;
  if (!blame) {
    table_.requeue(r, worker, /*suspect=*/false);
    return true;
  }
  requeue_blamed(r, worker, worker_name, /*counted=*/true, repeat_as_suspect, {}, limit, at_limit);
  return true;
}

bool Job::requeue_lost(ChunkRange r, WorkerId worker, const std::string& worker_name, const std::string& what,
                       bool alone, uint32_t limit, std::vector<ChunkRange>& at_limit) {
  if (!table_.running_here(r, worker)) return false;
  const std::string shown = alone ? fmt::format("{} ({})", worker_name, what) : std::string();
  requeue_blamed(r, worker, worker_name, /*counted=*/alone, /*repeat_as_suspect=*/true, shown, limit, &at_limit);
  return true;
}

void Job::requeue_blamed(ChunkRange r, WorkerId worker, const std::string& worker_name, bool counted,
                         bool repeat_as_suspect, const std::string& shown, uint32_t limit,
                         std::vector<ChunkRange>* at_limit) {
  // Stretches alike (failed before or not) go back together; then the whole range is blamed.
  for (uint64_t at = r.first; at < r.end();) {
    uint64_t end = 0;
    const bool failed = failed_before(at, end);  // sets `end` either way
    const bool suspect = repeat_as_suspect && failed;
    end = std::min(end, r.end());
    table_.requeue(ChunkRange{at, end - at}, worker, suspect);
    at = end;
  }
  add_blame(r, worker_name, counted, shown);
  if (at_limit != nullptr && counted) {
    for (auto it = failures_.lower_bound(r.first); it != failures_.end() && it->first < r.end(); ++it)
      if (it->second.counted >= limit) at_limit->push_back(ChunkRange{it->first, it->second.end - it->first});
  }
}

uint32_t Job::requeue(uint64_t chunk, WorkerId worker, const std::string& worker_name, bool blame,
                      bool repeat_as_suspect) {
  if (!requeue(ChunkRange{chunk, 1}, worker, worker_name, blame, repeat_as_suspect)) return 0;
  return failures(chunk);
}

bool Job::requeue_halves(ChunkRange r, WorkerId worker, const std::string& worker_name) {
  if (r.count < 2 || !table_.running_here(r, worker)) return false;
  const uint64_t half = r.count / 2;
  table_.requeue(ChunkRange{r.first, half}, worker, /*suspect=*/true);
  table_.requeue(ChunkRange{r.first + half, r.count - half}, worker, /*suspect=*/true);
  add_blame(r, worker_name, /*counted=*/false);
  return true;
}

ChunkRange Job::take_suspect(WorkerId worker) {
  const uint64_t oldest = table_.oldest_suspect();
  const uint64_t max = oldest > kSuspectsOneByOne ? std::min<uint64_t>(oldest, UINT32_MAX) : 1;
  return table_.take_suspect(worker, max);
}

void Job::split_failures_at(uint64_t chunk) {
  auto it = failures_.upper_bound(chunk);
  if (it == failures_.begin()) return;
  --it;
  if (it->first == chunk || it->second.end <= chunk) return;
  Blame tail = it->second;
  it->second.end = chunk;
  failures_.emplace_hint(std::next(it), chunk, std::move(tail));
}

void Job::add_blame(ChunkRange r, const std::string& worker_name, bool counted, const std::string& shown) {
  split_failures_at(r.first);
  split_failures_at(r.end());
  auto it = failures_.lower_bound(r.first);
  for (uint64_t at = r.first; at < r.end();) {
    if (it != failures_.end() && it->first == at) {
      it->second.names.push_back(worker_name);
      it->second.counted += counted ? 1 : 0;
      if (!shown.empty()) it->second.shown.push_back(shown);
      at = it->second.end;
      ++it;
      continue;
    }
    const uint64_t gap_end = it != failures_.end() && it->first < r.end() ? it->first : r.end();
    Blame fresh{gap_end, {worker_name}, counted ? 1u : 0u, {}};
    if (!shown.empty()) fresh.shown.push_back(shown);
    it = std::next(failures_.emplace_hint(it, at, std::move(fresh)));
    at = gap_end;
  }
}

bool Job::failed_before(uint64_t chunk, uint64_t& stretch_end) const {
  auto it = failures_.upper_bound(chunk);
  if (it != failures_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end > chunk) {
      stretch_end = prev->second.end;
      return true;
    }
  }
  stretch_end = it == failures_.end() ? UINT64_MAX : it->first;
  return false;
}

const Job::Blame* Job::blame_of(uint64_t chunk) const {
  auto it = failures_.upper_bound(chunk);
  if (it == failures_.begin()) return nullptr;
  --it;
  return it->second.end > chunk ? &it->second : nullptr;
}

const std::vector<std::string>& Job::failed_on(uint64_t chunk) const {
  static const std::vector<std::string> kNone;
  const Blame* b = blame_of(chunk);
  return b != nullptr ? b->names : kNone;
}

const std::vector<std::string>& Job::shown_failures(uint64_t chunk) const {
  static const std::vector<std::string> kNone;
  const Blame* b = blame_of(chunk);
  return b != nullptr ? b->shown : kNone;
}

const std::vector<std::string>* Job::next_retry_failed_on() const {
  const std::optional<uint64_t> next = table_.next_requeued();
  if (!next) return nullptr;
  const Blame* b = blame_of(*next);
  return b != nullptr ? &b->names : nullptr;
}

std::vector<std::string> Job::failure_names(uint64_t chunk, bool copy) const {
  return distinct(copy ? verify.failed_on(chunk) : failed_on(chunk));
}

uint32_t Job::failures(uint64_t chunk) const {
  const Blame* b = blame_of(chunk);
  return b != nullptr ? b->counted : 0;
}

}  // namespace psched
