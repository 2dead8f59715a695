#include "sim_client.h"

#include <capnp/message.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstring>

#include "core/closed_form.h"
#include "net/framing.h"
#include "net/wire_convert.h"

namespace psched::loadgen {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// "" when the JobResult is the job's exact result, bit for bit; else what differs. The expected
// total is made as its terms (expected_run_compact over every chunk: the loadgen submits only jobs
// with an exact closed form) and compared with the result's term by term: both are the one split
// of an exact value into terms (ExactTerms), so equal terms are equal values.
std::string compare_exact(const JobSpec& spec, wire::JobResult::Reader got) {
  const std::optional<CompactPartial> e = expected_run_compact(spec, 0, spec.chunks());
  if (!e) return "the job has no exact closed form";
  if (got.getCount() != e->count) return fmt::format("count {} != {}", got.getCount(), e->count);
  if (!same_bits(got.getSum(), e->sum)) return fmt::format("sum {:.17g} != {:.17g}", got.getSum(), e->sum);
  const auto exact = got.getExact();
  const auto terms = exact.getTerms();
  bool same = terms.size() == e->exact.size() && exact.getNan() == 0 && exact.getPosInf() == 0 && exact.getNegInf() == 0;
  for (uint32_t i = 0; same && i < terms.size(); ++i) same = same_bits(terms[i], e->exact.data()[i]);
  if (!same) return "the exact sums differ";
  if (e->count > 0 && (!same_bits(got.getMin(), e->min) || !same_bits(got.getMax(), e->max)))
    return fmt::format("min/max {:.17g}/{:.17g} != {:.17g}/{:.17g}", got.getMin(), got.getMax(), e->min, e->max);
  return "";
}

}  // namespace

SimClient::SimClient(ClientPool& pool, uint32_t index)
    : SimPeer(pool.io(), pool.scheduler()), pool_(pool), index_(index) {
  burst_left_ = pool.plan().jobs_per_client;
}

void SimClient::say_hello(wire::Message::Builder m) {
  init_hello(m, wire::Role::CLIENT, fmt::format("loadgen-client-{}", index_), "");
}

void SimClient::submit(const JobSpec& spec) {
  const uint64_t tag = next_tag_++;
  ClientStats& st = pool_.stats();
  const auto now = Clock::now();
  if (st.submitted++ == 0) st.first_submit = now;
  submitted_[tag] = Pending{spec, now, 0};
  send_message(*conn(), [&](wire::Message::Builder m) {
    auto s = m.initSubmit();
    s.setTag(tag);
    to_wire(spec, s.initSpec());
    s.setVerifyFraction(pool_.plan().verify);
  });
}

void SimClient::submit_more() {
  if (!welcomed_ || !conn()) return;
  if (pool_.continuous()) {
    while (submitted_.size() < pool_.plan().outstanding && Clock::now() < pool_.plan().deadline)
      submit(pool_.next_job());
  } else {
    for (; burst_left_ > 0; --burst_left_) submit(pool_.next_job());
  }
  check_done();
}

void SimClient::check_done() {
  if (finished_ || !submitted_.empty()) return;
  const bool more = pool_.continuous() ? Clock::now() < pool_.plan().deadline : burst_left_ > 0;
  if (more) return;
  finished_ = true;
  pool_.client_finished();
}

void SimClient::fail(uint64_t tag, const std::string& message) {
  auto it = submitted_.find(tag);
  if (it == submitted_.end()) return;
  ClientStats& st = pool_.stats();
  ++st.failed;
  ++st.failure_counts[message];
  if (it->second.job_id) tag_of_job_.erase(it->second.job_id);
  submitted_.erase(it);
}

void SimClient::on_message(wire::Message::Reader message) {
  ClientStats& st = pool_.stats();
  switch (message.which()) {
    case wire::Message::WELCOME:
      welcomed_ = true;
      submit_more();
      return;
    case wire::Message::JOB_ACCEPTED: {
      auto a = message.getJobAccepted();
      auto it = submitted_.find(a.getTag());
      if (it == submitted_.end()) return;
      it->second.job_id = a.getJobId();
      tag_of_job_[a.getJobId()] = a.getTag();
      return;
    }
    case wire::Message::JOB_RESULT: {
      auto r = message.getJobResult();
      auto t = tag_of_job_.find(r.getJobId());
      if (t == tag_of_job_.end()) return;
      auto it = submitted_.find(t->second);
      const auto now = Clock::now();
      std::string diff = compare_exact(it->second.spec, r);
      if (diff.empty() && r.getMismatchCount() > 0)
        diff = fmt::format("verify found {} mismatches, the first at chunk {}", r.getMismatchCount(),
                           r.getMismatches().size() > 0 ? r.getMismatches()[0].getChunk() : 0);
      if (diff.empty()) {
        ++st.ok;
        st.latency_s.push_back(std::chrono::duration<double>(now - it->second.submitted).count());
      } else {
        ++st.mismatched;
        st.mismatches.push_back(fmt::format("job {}: {} ({})", r.getJobId(), diff, describe(it->second.spec)));
      }
      st.last_result = now;
      submitted_.erase(it);
      tag_of_job_.erase(t);
      submit_more();
      return;
    }
    case wire::Message::JOB_FAILED: {
      auto f = message.getJobFailed();
      const std::string text = f.getMessage().cStr();
      if (f.getJobId() != 0) {
        auto t = tag_of_job_.find(f.getJobId());
        if (t != tag_of_job_.end()) fail(t->second, text);
      } else {
        fail(f.getTag(), text);  // a refused submit: no job yet, named by its tag
      }
      submit_more();
      return;
    }
    case wire::Message::ERROR:
      spdlog::warn("client {}: scheduler says: {}", index_, message.getError().getMessage().cStr());
      return;
    case wire::Message::PROGRESS:
    case wire::Message::HEARTBEAT:
    case wire::Message::GOODBYE:  // the close follows
      return;
    default:
      unknown_message(fmt::format("simulated client {}", index_), message);
  }
}

void SimClient::on_close(const std::string& why) {
  welcomed_ = false;
  std::vector<uint64_t> tags;
  for (auto& [tag, p] : submitted_) tags.push_back(tag);
  for (uint64_t tag : tags) fail(tag, fmt::format("connection to the scheduler lost: {}", why));
  if (stopped()) return;
  if (!pool_.continuous() || Clock::now() >= pool_.plan().deadline) {
    burst_left_ = 0;
    check_done();
    return;
  }
  reconnect_after(std::chrono::milliseconds(100));
}

void SimClient::heartbeat() {
  if (welcomed_ && conn())
    send_message(*conn(), [](wire::Message::Builder m) { m.initHeartbeat(); });
  if (pool_.continuous() && !finished_) check_done();
}

ClientPool::ClientPool(asio::io_context& io, asio::ip::tcp::endpoint scheduler, ClientPlan plan)
    : io_(io), scheduler_(std::move(scheduler)), plan_(std::move(plan)), heartbeat_timer_(io) {}

void ClientPool::start(uint32_t clients) {
  for (uint32_t i = 0; i < clients; ++i) clients_.push_back(std::make_shared<SimClient>(*this, i));
  for (auto& c : clients_) c->connect();
  heartbeat_all();
}

JobSpec ClientPool::next_job() {
  JobSpec s = plan_.base;
  const uint64_t n = job_number_++;
  if (plan_.vary) {
    // Distinct answers per job: a result delivered to the wrong job cannot pass.
    if (s.generator == Generator::kArange) {
      s.param0 = double(n % 1000);
      s.param1 = double(1 + n % 3);
    } else {
      s.param0 = double(1 + n % 7);
    }
    s.row_sel = {n % 2, kToEnd, 1 + n % 3};
    s.col_sel = {n % 3, kToEnd, 1 + (n / 3) % 2};
  }
  return s;
}

void ClientPool::client_finished() {
  ++finished_clients_;
  if (finished() && on_finished) asio::post(io_, on_finished);
}

void ClientPool::heartbeat_all() {
  if (stopping_) return;
  for (auto& c : clients_) c->heartbeat();
  heartbeat_timer_.expires_after(std::chrono::milliseconds(500));
  heartbeat_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) heartbeat_all();
  });
}

void ClientPool::stop() {
  stopping_ = true;
  heartbeat_timer_.cancel();
  for (auto& c : clients_) c->leave("loadgen done");
}

}  // namespace psched::loadgen
