// psched-loadgen against a server that is not psched and sends its simulated peers a message they
// have no case for: the loadgen must stop and name it, not drop it and go on measuring.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "raw_peer.h"
#include "support/test_cluster.h"

using namespace psched::test;
namespace wire = psched::wire;

TEST_CASE("psched-loadgen stops naming a message its simulated worker has no case for", "[security][loadgen]") {
  // Welcome, then ClusterInfo: an answer no worker asks for.
  FakeServer odd([](int fd) {
    const std::string frames = frame_of([](wire::Message::Builder m) {
                                 auto w = m.initWelcome();
                                 w.setProtocolVersion(wire::PROTOCOL_VERSION);
                                 w.setPeerId(1);
                                 w.setHeartbeatMs(1000);
                               }) +
                               frame_of([](wire::Message::Builder m) { m.initClusterInfo().setTag(7); });
    (void)!write(fd, frames.data(), frames.size());
    char buf[256];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
  });
  std::string out;
  const int status = run_command({bin_dir() + "/psched-loadgen", "--scheduler",
                                  "tcp://127.0.0.1:" + std::to_string(odd.port()), "-w", "1", "-c", "1", "-j", "1",
                                  "--ready-timeout", "20"},
                                 &out, 30000);
  INFO(out);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(out.find("psched-loadgen: simulated worker 0 got a message it has no case for (clusterInfo): the "
                 "simulator no longer speaks psched's protocol") != std::string::npos);
}
