// A real psched, a real worker and a real job, while a raw socket misbehaves on the scheduler's port:
// junk, frames too large or cut short, broken Cap'n Proto, messages out of order or of unknown
// kinds, hostile workers, forged log lines (silence, dribbling, too many connections and floods:
// connection_limits_test.cpp). Each time the misbehaving peer gets an Error (where one can be
// sent) and is closed, and the job comes through exact.
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <memory>

#include "abuse_helpers.h"
#include "raw_peer.h"

using namespace psched::test;
namespace wire = psched::wire;

namespace {

// Sends `bytes` on a fresh connection; returns the Error the scheduler answers ("" if none), after
// checking that the connection is then closed.
std::string error_for(TestCluster& cluster, const std::string& bytes) {
  RawPeer peer(port_of(cluster));
  peer.send_bytes(bytes);
  const std::string error = peer.read_error();
  CHECK(peer.wait_closed());
  return error;
}

}  // namespace

TEST_CASE("junk bytes get an Error naming the bad frame, and the connection is closed", "[security]") {
  while_a_job_runs([](TestCluster& cluster) {
    // 'GET ' read as a length is 542393671 bytes (not even whole words); 'POST' is 1414745936.
    CHECK(error_for(cluster, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") ==
          "malformed frame: length 542393671 is not a positive multiple of 8");
    CHECK(error_for(cluster, "POST / HTTP/1.1\r\n\r\n") ==
          "frame of 1414745936 bytes exceeds the limit of 65536 bytes");
    CHECK(error_for(cluster, "SSH-2.0-OpenSSH_9.2\r\n").rfind("malformed frame: ", 0) == 0);
    CHECK(error_for(cluster, std::string(64, '\0')) == "malformed frame: length 0 is not a positive multiple of 8");
  });
}

TEST_CASE("a huge length prefix is refused before any body is read", "[security]") {
  while_a_job_runs([](TestCluster& cluster) {
    // Before Hello frames are held to 64 KiB (a Hello is far smaller): a stranger cannot make the
    // scheduler buffer --max-frame bytes.
    CHECK(error_for(cluster, length_prefix(0xfffffff8u)) ==
          "frame of 4294967288 bytes exceeds the limit of 65536 bytes");
    CHECK(error_for(cluster, length_prefix(65544)) == "frame of 65544 bytes exceeds the limit of 65536 bytes");
    // After Hello, --max-frame (16 MiB by default).
    RawPeer client(port_of(cluster));
    client.hello_as_client();
    REQUIRE(client.read_until(wire::Message::WELCOME));
    client.send_bytes(length_prefix((16u << 20) + 8));
    CHECK(client.read_error() == "frame of 16777224 bytes exceeds the limit of 16777216 bytes");
    CHECK(client.wait_closed());
    CHECK(error_for(cluster, length_prefix(0)) ==
          "malformed frame: length 0 is not a positive multiple of 8");
    CHECK(error_for(cluster, length_prefix(13)) ==
          "malformed frame: length 13 is not a positive multiple of 8");
  });
}

TEST_CASE("the --max-frame flag sets the frame limit", "[security]") {
  TestCluster cluster({.extra_args = {"--max-frame", "65536"}});
  CHECK(error_for(cluster, length_prefix(65544)) == "frame of 65544 bytes exceeds the limit of 65536 bytes");
  RawPeer client(port_of(cluster));
  client.hello_as_client();
  REQUIRE(client.read_until(wire::Message::WELCOME));
  client.send_bytes(length_prefix(65544));
  CHECK(client.read_error() == "frame of 65544 bytes exceeds the limit of 65536 bytes");
}

TEST_CASE("malformed Cap'n Proto gets an Error saying the message is malformed", "[security]") {
  while_a_job_runs([](TestCluster& cluster) {
    // A segment table promising more than the frame holds.
    std::string table = length_prefix(16);
    const uint32_t lie[4] = {1, 1000, 1000, 0};  // two segments of 1000 words each, in 16 bytes
    table.append(reinterpret_cast<const char*>(lie), sizeof(lie));
    CHECK(error_for(cluster, table).rfind("malformed message: ", 0) == 0);
    // A root that is a far pointer into a segment that does not exist.
    CHECK(error_for(cluster, single_segment({far_ptr(5, 0)})).rfind("malformed message: ", 0) == 0);
    // Eight bytes of noise as a whole message.
    CHECK(error_for(cluster, length_prefix(8) + "\xff\xff\xff\x7f\x01\x02\x03\x04")
              .rfind("malformed message: ", 0) == 0);
  });
}

TEST_CASE("a message that is not Hello first is refused: a job before Hello gets nothing run", "[security]") {
  while_a_job_runs([](TestCluster& cluster) {
    const std::string submit = frame_of([](wire::Message::Builder m) {
      auto spec = m.initSubmit().initSpec();
      spec.setRows(10);
    });
    CHECK(error_for(cluster, submit) == "expected Hello as the first message");
    const std::string heartbeat = frame_of([](wire::Message::Builder m) { m.initHeartbeat(); });
    CHECK(error_for(cluster, heartbeat) == "expected Hello as the first message");
  });
}

TEST_CASE("unknown message kinds (a union discriminant from the future) are refused", "[security]") {
  while_a_job_runs([](TestCluster& cluster) {
    std::string frame = frame_of([](wire::Message::Builder m) { m.initHeartbeat(); });
    // Frame: length(4) + segment table(8) + root pointer(8), then Message's data word, whose
    // first 16 bits are the union's discriminant.
    REQUIRE(uint8_t(frame[20]) == uint8_t(wire::Message::HEARTBEAT));
    frame[20] = char(99);
    CHECK(error_for(cluster, frame) == "expected Hello as the first message");

    RawPeer client(port_of(cluster));
    client.hello_as_client();
    REQUIRE(client.read_until(wire::Message::WELCOME));
    client.send_bytes(frame);
    CHECK(client.read_error() == "unexpected message kind 99 from a client");
    CHECK(client.wait_closed());

    RawPeer worker(port_of(cluster));
    worker.hello_as_worker();
    REQUIRE(worker.read_until(wire::Message::WELCOME));
    worker.send_bytes(frame);
    CHECK(worker.read_error() == "unexpected message kind 99 from a worker");
    CHECK(worker.wait_closed());
  });
}

TEST_CASE("messages of the other role or a second Hello are refused", "[security]") {
  while_a_job_runs([](TestCluster& cluster) {
    RawPeer client(port_of(cluster));
    client.hello_as_client();
    REQUIRE(client.read_until(wire::Message::WELCOME));
    client.send_message([](wire::Message::Builder m) { m.initResultBatch().setJobId(1); });
    CHECK(client.read_error() == "unexpected message kind 16 from a client");
    CHECK(client.wait_closed());

    RawPeer again(port_of(cluster));
    again.hello_as_client();
    REQUIRE(again.read_until(wire::Message::WELCOME));
    again.hello_as_client();
    CHECK(again.read_error() == "unexpected message kind 0 from a client");
    CHECK(again.wait_closed());

    RawPeer role(port_of(cluster));
    role.send_message([](wire::Message::Builder m) {
      auto h = m.initHello();
      h.setProtocolVersion(wire::PROTOCOL_VERSION);
      h.setRole(static_cast<wire::Role>(7));
    });
    CHECK(role.read_error() == "unknown role in Hello");
    CHECK(role.wait_closed());
  });
}

TEST_CASE("a Hello with another protocol version is refused naming both versions", "[security]") {
  while_a_job_runs([](TestCluster& cluster) {
    RawPeer peer(port_of(cluster));
    peer.hello_as_client("", 99);
    CHECK(peer.read_error() == "protocol version mismatch: scheduler speaks " + std::to_string(wire::PROTOCOL_VERSION) +
                                   ", peer speaks 99 (run one psched release on every node)");
    CHECK(peer.wait_closed());
  });
}

TEST_CASE("a pointer chain 1000 deep and a list that amplifies itself are refused cheaply", "[security]") {
  while_a_job_runs([](TestCluster& cluster) {
    // Message(hello) -> Hello{version 1, name -> struct -> struct -> ...}: every struct's first
    // pointer points at the next one.
    std::vector<uint64_t> chain = {struct_ptr(0, 1, 1), uint64_t(wire::Message::HELLO)};
    chain.push_back(struct_ptr(0, 1, 3));
    chain.push_back(uint64_t(wire::PROTOCOL_VERSION) << 32 | uint64_t(wire::Role::CLIENT));
    chain.push_back(struct_ptr(2, 1, 1));  // name: skips token and worker
    chain.push_back(0);
    chain.push_back(0);
    for (int i = 0; i < 1000; ++i) {
      chain.push_back(0);                    // data word
      chain.push_back(struct_ptr(0, 1, 1));  // pointer to the next
    }
    chain.push_back(0);
    chain.push_back(0);
    const auto t0 = Clock::now();
    CHECK(error_for(cluster, single_segment(chain)).rfind("malformed message: ", 0) == 0);

    // A worker's ResultBatch for the running job whose results are 2^29-1 zero-sized structs in
    // one word: reading it would loop half a billion times; the traversal limit stops it at once.
    RawPeer worker(port_of(cluster));
    worker.hello_as_worker();
    REQUIRE(worker.read_until(wire::Message::WELCOME));
    const std::vector<uint64_t> amplified = {
        struct_ptr(0, 1, 1), uint64_t(wire::Message::RESULT_BATCH),
        struct_ptr(0, 2, 2),  // ResultBatch
        1,                    // jobId 1: the running job
        0,                    // busySeconds
        composite_list_ptr(1, 0),
        0,                    // failures: none
        uint64_t((1u << 29) - 1) << 2,  // list tag: 2^29-1 elements of 0 data, 0 pointer words
    };
    worker.send_bytes(single_segment(amplified));
    const std::string error = worker.read_error();
    CHECK(error.rfind("malformed message: ", 0) == 0);
    CHECK(error.find("traversal limit") != std::string::npos);
    CHECK(worker.wait_closed());
    CHECK(seconds_since(t0) < 5);
  });
}

TEST_CASE("a fake worker's result for a chunk never assigned to it is refused and its chunk runs elsewhere",
          "[security]") {
  while_a_job_runs([](TestCluster& cluster) {
    // It is given a chunk of the running job. It answers with a poisoned result for that chunk (a
    // sum that could be true: the count its chunk has, finite terms) and one for a chunk it never
    // got: the whole batch is refused, so the poison never counts.
    const auto [peer, job_id, assigned] = fake_worker_with_work(cluster);
    RawPeer& fake = *peer;
    fake.send_message([&](wire::Message::Builder m) {
      auto b = m.initResultBatch();
      b.setJobId(job_id);
      auto results = b.initResults(2);
      results[0].setChunk(assigned);
      results[0].setSum(1e300);
      results[0].setCount(BackgroundJob::kChunkElements);
      results[0].initExact().initTerms(1).set(0, 1e300);
      results[1].setChunk(4000000);
      results[1].setSum(1e300);
      results[1].setCount(1);
    });
    CHECK(fake.read_error() ==
          "result for chunk 4000000 of job " + std::to_string(job_id) + " that was not assigned to this worker");
    CHECK(fake.wait_closed());

    RawPeer unknown(port_of(cluster));
    unknown.hello_as_worker(1);
    REQUIRE(unknown.read_until(wire::Message::WELCOME));
    unknown.send_message([](wire::Message::Builder m) { m.initResultBatch().setJobId(777); });
    CHECK(unknown.read_error() == "results for unknown job 777");
    CHECK(unknown.wait_closed());
  });
}

TEST_CASE("a result for chunks that run past 2^64 is refused naming them forwards, and a Cancel for another "
          "client's job gets an Error naming it and cancels nothing", "[security]") {
  while_a_job_runs([](TestCluster& cluster) {
    const FakeWorker fake = fake_worker_with_work(cluster);
    const uint64_t job_id = fake.job_id;
    RawPeer stranger(port_of(cluster));
    stranger.hello_as_client();
    REQUIRE(stranger.read_until(wire::Message::WELCOME));
    stranger.send_message([&](wire::Message::Builder m) { m.initCancel().setJobId(job_id); });
    CHECK(stranger.read_error() == "job " + std::to_string(job_id) + " is another client's: not cancelled");

    fake.peer->send_message([&](wire::Message::Builder m) {
      auto b = m.initResultBatch();
      b.setJobId(job_id);
      auto results = b.initResults(1);
      results[0].setChunk(5);
      results[0].setChunks(UINT64_MAX - 3);  // chunks 5 .. 2^64 + 1
      results[0].setCount(1);
    });
    CHECK(fake.peer->read_error() == "result for 18446744073709551612 chunks from chunk 5 of job " + std::to_string(job_id) +
                                   " that were not all assigned to this worker");
  });
}

TEST_CASE("names and reasons a peer sends cannot forge log lines", "[security]") {
  TestCluster cluster;
  RawPeer worker(port_of(cluster));
  worker.send_message([](wire::Message::Builder m) {
    auto h = m.initHello();
    h.setRole(wire::Role::WORKER);
    h.setProtocolVersion(wire::PROTOCOL_VERSION);
    h.setName("evil\n2030-01-01 00:00:00.000 psched info FORGED \x1b[31mred");
    h.initWorker().setBackend("cpu\r\nFORGED-BACKEND");
  });
  REQUIRE(worker.read_until(wire::Message::WELCOME));
  worker.send_message([](wire::Message::Builder m) { m.initGoodbye().setReason("bye\nFORGED-REASON"); });
  CHECK(worker.wait_closed());
  const std::string log = cluster.log_of(cluster.scheduler_pid());
  INFO(log);
  CHECK(log.find("'evil?2030-01-01 00:00:00.000 psched info FORGED ?[31mred'") != std::string::npos);
  CHECK(log.find("\nFORGED") == std::string::npos);
  CHECK(log.find("\n2030-01-01") == std::string::npos);
  CHECK(log.find('\x1b') == std::string::npos);
  CHECK(log.find("leaving: bye?FORGED-REASON") != std::string::npos);
}

TEST_CASE("a malformed burn status gets an Error saying why, and the client's connection and psched go on", "[security][burn]") {
  while_a_job_runs([](TestCluster& cluster) {
    RawPeer client(port_of(cluster));
    client.hello_as_client();
    REQUIRE(client.read_until(wire::Message::WELCOME));

    client.send_message([](wire::Message::Builder m) {
      auto gpus = m.initBurnStatus().initGpus(1);
      gpus[0].setWorker("gpu-0");
      gpus[0].setVerdict(static_cast<wire::BurnVerdict>(7));
    });
    CHECK(client.read_error() == "burn status: verdict 7 unknown (expected pass, warn or fail)");
    client.send_message([](wire::Message::Builder m) { m.initBurnStatus().initGpus(5000); });
    CHECK(client.read_error() == "burn status: 5000 GPUs, at most 4096");

    // Still served: a ClusterInfoRequest is answered on the same connection.
    client.send_message([](wire::Message::Builder m) { m.initClusterInfoRequest().setTag(3); });
    CHECK(client.read_until(wire::Message::CLUSTER_INFO));

    RawPeer worker(port_of(cluster));
    worker.hello_as_worker();
    REQUIRE(worker.read_until(wire::Message::WELCOME));
    worker.send_message([](wire::Message::Builder m) { m.initBurnStatus(); });
    CHECK(worker.read_error() == "unexpected message kind 18 from a worker");
  });
}
