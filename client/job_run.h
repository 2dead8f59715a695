// JobRun: one submitted job as libpclient sees it, a state machine with one transition function
// (to()), apart from the connection and the event loop that feed it (client.cpp). Messages from the
// scheduler, the caller's cancel and the no-workers timeout are its events; what it sends (Cancel)
// goes out through the `send` it is given, so tests drive it with built messages and no socket
// (tests/client/job_run_test.cpp).
//
//   submitted --JobAccepted(our tag)--> accepted --JobResult--> done
//       |                                   |------JobFailed(our id) / Error / no workers too long--> failed
//       |                                   `------cancel (sent at once, or once accepted)--> cancelled
//       `--JobFailed(id 0, our tag) / Error--> failed
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "pclient/client.h"
#include "proto/psched.capnp.h"

namespace pclient {

class JobRun {
 public:
  enum class State { kSubmitted, kAccepted, kDone, kFailed, kCancelled };
  using Fill = std::function<void(psched::wire::Message::Builder)>;
  using Send = std::function<void(const Fill&)>;
  // Asked to start (true) or stop (false) the no-workers timer: the job has no worker to run it
  // (Progress.noWorkers) or has one again. On expiry the caller calls no_workers_timeout().
  using WatchWorkers = std::function<void(bool start)>;

  JobRun(uint64_t tag, const RunOptions& options, Send send, WatchWorkers watch_workers);

  State state() const { return state_; }
  bool finished() const { return state_ == State::kDone || state_ == State::kFailed || state_ == State::kCancelled; }
  uint64_t job_id() const { return job_id_; }
  const Result& result() const { return result_; }        // when done
  const std::string& failure() const { return failure_; }  // when failed

  // Events.
  void on_message(psched::wire::Message::Reader message);
  // The caller wants the job cancelled: at once when accepted, else as soon as it is (a job has no
  // id to cancel before JobAccepted).
  void cancel();
  // No worker joined within RunOptions::no_workers_timeout_ms: the job is cancelled and fails.
  void no_workers_timeout();

 private:
  // The one transition function: checks the move is legal (PSCHED_ASSERT) and makes it.
  void to(State next);
  void on_progress(psched::wire::Progress::Reader p);
  void send_cancel();  // the Cancel message only; the caller moves to its state

  uint64_t tag_;
  const RunOptions& options_;
  Send send_;
  WatchWorkers watch_workers_;
  State state_ = State::kSubmitted;
  uint64_t job_id_ = 0;
  bool cancel_wanted_ = false;
  bool waiting_for_workers_ = false;
  uint64_t chunks_total_ = 0, chunks_left_ = 0;  // when the wait for workers began
  std::string last_notice_;  // psched's last word on the job (Progress.notices), for the failure
  Result result_;
  std::string failure_;
};

// What a scheduler's messages say, as the client library's types.
Progress progress_of(uint64_t job_id, psched::wire::Progress::Reader p);
Result result_of(uint64_t job_id, psched::wire::JobResult::Reader r);

}  // namespace pclient
