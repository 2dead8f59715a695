// JobRun (client/job_run.h): a submitted job's states as the client sees them, driven by built
// scheduler messages, the caller's cancel and the no-workers timeout; no socket.
#include <catch2/catch.hpp>

#include <capnp/message.h>

#include <vector>

#include "client/job_run.h"

using namespace pclient;
namespace wire = psched::wire;

namespace {

// A run with what it sends (the job ids it cancelled) and the no-workers timer's calls recorded.
struct Harness {
  RunOptions options;
  std::vector<uint64_t> cancels;
  std::vector<bool> timer;  // start / stop, in order
  std::vector<uint64_t> progress;  // chunks done, per on_progress
  JobRun run;
  explicit Harness(int no_workers_timeout_ms = 60000)
      : options(make_options(no_workers_timeout_ms)),
        run(7, options, [this](const JobRun::Fill& fill) { cancels.push_back(sent_cancel(fill)); },
            [this](bool start) { timer.push_back(start); }) {}

  RunOptions make_options(int no_workers_timeout_ms) {
    RunOptions o;
    o.no_workers_timeout_ms = no_workers_timeout_ms;
    o.on_progress = [this](const Progress& p) { progress.push_back(p.chunks_done); };
    return o;
  }
  static uint64_t sent_cancel(const JobRun::Fill& fill) {
    capnp::MallocMessageBuilder m;
    fill(m.initRoot<wire::Message>());
    auto r = m.getRoot<wire::Message>().asReader();
    REQUIRE(r.which() == wire::Message::CANCEL);
    return r.getCancel().getJobId();
  }
  template <typename Build>
  void deliver(Build&& build) {
    capnp::MallocMessageBuilder m;
    build(m.initRoot<wire::Message>());
    run.on_message(m.getRoot<wire::Message>().asReader());
  }
  void accepted(uint64_t tag, uint64_t job) {
    deliver([&](wire::Message::Builder b) {
      auto a = b.initJobAccepted();
      a.setTag(tag);
      a.setJobId(job);
    });
  }
  void progress_of(uint64_t job, uint64_t done, bool no_workers) {
    deliver([&](wire::Message::Builder b) {
      auto p = b.initProgress();
      p.setJobId(job);
      p.setChunksDone(done);
      p.setChunksTotal(10);
      p.setNoWorkers(no_workers);
    });
  }
  void result_for(uint64_t job, double sum) {
    deliver([&](wire::Message::Builder b) {
      auto r = b.initJobResult();
      r.setJobId(job);
      r.setSum(sum);
      r.setChunks(10);
    });
  }
  // Job 0: a refused Submit, named by its tag.
  void failed(uint64_t job, const char* why, uint64_t tag = 0) {
    deliver([&](wire::Message::Builder b) {
      auto f = b.initJobFailed();
      f.setJobId(job);
      f.setTag(tag);
      f.setMessage(why);
    });
  }
};

}  // namespace

TEST_CASE("a job run goes submitted, accepted, done, taking only its own job's messages", "[job_run]") {
  Harness h;
  CHECK(h.run.state() == JobRun::State::kSubmitted);
  h.accepted(6, 40);  // another submission's tag
  CHECK(h.run.state() == JobRun::State::kSubmitted);
  h.accepted(7, 41);
  CHECK(h.run.state() == JobRun::State::kAccepted);
  CHECK(h.run.job_id() == 41);
  h.progress_of(40, 3, false);  // another job's
  h.progress_of(41, 4, false);
  CHECK(h.progress == std::vector<uint64_t>{4});
  h.result_for(40, 1.0);
  CHECK_FALSE(h.run.finished());
  h.result_for(41, 2.5);
  CHECK(h.run.state() == JobRun::State::kDone);
  CHECK(h.run.result().sum == 2.5);
  CHECK(h.run.result().job_id == 41);
  h.failed(41, "late");  // nothing moves a finished run
  CHECK(h.run.state() == JobRun::State::kDone);
}

TEST_CASE("a job refused before it has an id fails with the scheduler's words", "[job_run]") {
  Harness h;
  h.failed(0, "rows must be > 0", 7);
  CHECK(h.run.state() == JobRun::State::kFailed);
  CHECK(h.run.failure() == "rows must be > 0");
}

TEST_CASE("another submission's refusal leaves the run alone, told apart by its tag", "[job_run]") {
  Harness h;
  h.failed(0, "too many jobs", 6);  // the client's other Submit, in flight beside ours
  CHECK(h.run.state() == JobRun::State::kSubmitted);
  h.accepted(7, 41);
  h.failed(0, "too many jobs", 7);  // no refusal once accepted: the job has an id
  CHECK(h.run.state() == JobRun::State::kAccepted);
  h.failed(41, "worker lost");
  CHECK(h.run.state() == JobRun::State::kFailed);
  CHECK(h.run.failure() == "worker lost");
}

TEST_CASE("a cancel before JobAccepted goes out once the job has an id", "[job_run]") {
  Harness h;
  h.run.cancel();
  CHECK(h.cancels.empty());
  CHECK(h.run.state() == JobRun::State::kSubmitted);
  h.accepted(7, 5);
  CHECK(h.cancels == std::vector<uint64_t>{5});
  CHECK(h.run.state() == JobRun::State::kCancelled);
}

TEST_CASE("no workers starts the timer, a worker joining stops it, and the timeout fails the job", "[job_run]") {
  Harness h;
  h.accepted(7, 9);
  h.progress_of(9, 2, true);
  h.progress_of(9, 2, true);  // still waiting: the timer is not started again
  CHECK(h.timer == std::vector<bool>{true});
  h.progress_of(9, 3, false);
  CHECK(h.timer == std::vector<bool>{true, false});
  h.run.no_workers_timeout();  // a timer that fired as it was stopped: nothing
  CHECK(h.run.state() == JobRun::State::kAccepted);
  h.progress_of(9, 3, true);
  h.run.no_workers_timeout();
  CHECK(h.run.state() == JobRun::State::kFailed);
  CHECK(h.cancels == std::vector<uint64_t>{9});
  CHECK(h.run.failure().find("no workers: none joined within 60 s, 7 of 10 chunks left") == 0);
}

TEST_CASE("with no no-workers timeout a job waits for workers without a timer", "[job_run]") {
  Harness h(/*no_workers_timeout_ms=*/0);
  h.accepted(7, 9);
  h.progress_of(9, 0, true);
  CHECK(h.timer.empty());
  CHECK(h.run.state() == JobRun::State::kAccepted);
}
