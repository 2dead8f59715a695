// Certificates for the TLS tests and the TLS fuzzer, made by deploy/make-certs.sh (the openssl CLI,
// as operators make them) in a temporary directory that is removed with the object. Header-only so
// that the fuzz targets, which cannot link the Catch2 support library, share it; the including
// target defines PSCHED_SOURCE_DIR (where deploy/ is).
#pragma once

#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/process.h"
#include "net/tls.h"

namespace psched::test {

// A cluster CA with pairs for scheduler, worker and client; a second CA ("other") with its own
// worker; an expired pair of the cluster CA. Removed at the end.
struct TestCerts {
  std::string dir;
  TestCerts() {
    char tmpl[] = "/tmp/psched-tls.XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed for the test certificates");
    dir = tmpl;
    make({dir + "/cluster", "scheduler", "worker", "client"});
    make({dir + "/other", "worker"});
    make({"--not-before", "20200101000000Z", "--not-after", "20210101000000Z", dir + "/cluster", "expired"});
  }
  ~TestCerts() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  TestCerts(const TestCerts&) = delete;
  TestCerts& operator=(const TestCerts&) = delete;

  psched::TlsFiles files(const std::string& name, const std::string& ca = "cluster") const {
    return {dir + "/" + ca + "/ca.pem", dir + "/" + ca + "/" + name + ".pem", dir + "/" + ca + "/" + name + ".key"};
  }
  std::vector<std::string> args(const std::string& name, const std::string& ca = "cluster") const {
    const psched::TlsFiles f = files(name, ca);
    return {"--tls-ca-file", f.ca_file, "--tls-cert", f.cert_file, "--tls-key", f.key_file};
  }

 private:
  // Runs make-certs.sh with `args`; throws with its output when it fails.
  void make(const std::vector<std::string>& args) const {
    const std::string log = dir + "/make-certs.log";
    psched::ChildSpec spec;
    spec.path = PSCHED_SOURCE_DIR "/deploy/make-certs.sh";
    spec.args = args;
    spec.stdout_path = spec.stderr_path = log;
    int status = -1;
    auto pid = psched::spawn_child(spec);
    if (pid && !psched::wait_child(*pid, 60000, &status)) status = psched::stop_child(*pid, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
    std::stringstream out;
    out << std::ifstream(log).rdbuf();
    throw std::runtime_error("make-certs.sh failed: " + (pid ? out.str() : pid.message()));
  }
};

}  // namespace psched::test
