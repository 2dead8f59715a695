#!/usr/bin/env bash
# cmake --install into a temp prefix, then what a user does with it: a tiny consumer project built
# against the prefix with find_package(pclient) (and once more with pkg-config), run against the
# installed psched + pcuda-worker: an exact arange sum. Also: the deploy kit is installed, its ssh
# scripts find their own prefix, and the installed systemd units point at the installed binaries.
#
#   install_test.sh BIN_DIR SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$(cd "$2" && pwd)
build=$(cd "$3" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$src/tests/deploy/lib.sh"
command -v cmake >/dev/null || skip "cmake not installed"
command -v c++ >/dev/null || skip "no C++ compiler"

T=$(mktemp -d "${TMPDIR:-/tmp}/psched-deploy-install.XXXXXX")
pids=()
teardown() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap teardown EXIT
prefix=$T/prefix

say "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$T/install.log" || { cat "$T/install.log"; fail "cmake --install"; }
for f in bin/psched bin/pcuda-worker bin/pbench include/pclient/client.h \
  share/psched/deploy/README.md share/psched/deploy/slurm/psched.sbatch \
  share/psched/deploy/k8s/scheduler.yaml share/psched/deploy/docker/Dockerfile; do
  [[ -e "$prefix/$f" ]] || fail "not installed: $f"
done
for f in ssh/launch-scheduler.sh ssh/launch-workers.sh ssh/cleanup.sh ssh/remote/start-daemon.sh; do
  [[ -x "$prefix/share/psched/deploy/$f" ]] || fail "not installed executable: $f"
done
lib=$(find "$prefix" -name libpclient.a | head -n 1)
config=$(find "$prefix" -name pclientConfig.cmake | head -n 1)
pc=$(find "$prefix" -name pclient.pc | head -n 1)
[[ -n "$lib" && -n "$config" && -n "$pc" ]] || fail "libpclient.a, pclientConfig.cmake or pclient.pc missing"
echo "installed: ${lib#"$prefix"/}, ${config#"$prefix"/}, ${pc#"$prefix"/}"
say "the ssh kit finds its own prefix"
# shellcheck disable=SC2016  # expanded by the inner bash
own=$(bash -c '. "$1/share/psched/deploy/ssh/common.sh" && echo "$PREFIX"' _ "$prefix")
[[ "$own" == "$prefix" ]] || fail "installed deploy/ssh/common.sh thinks the prefix is '$own'"

say "installed systemd units point at $prefix/bin"
grep -q "^ExecStart=$prefix/bin/psched " "$prefix/share/psched/deploy/systemd/psched.service" ||
  fail "installed psched.service: $(grep ExecStart "$prefix/share/psched/deploy/systemd/psched.service")"
grep -q "^ExecStart=$prefix/bin/pcuda-worker " "$prefix/share/psched/deploy/systemd/pcuda-worker.service" ||
  fail "installed pcuda-worker.service"

say "a consumer project: find_package(pclient), linked with nothing else (the archive is self-contained)"
mkdir -p "$T/consumer"
cat >"$T/consumer/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(pclient_consumer CXX)
find_package(pclient 0.1 REQUIRED)
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE psched::pclient)
EOF
cat >"$T/consumer/main.cpp" <<'EOF'
// Sums arange(0, 1) over a 2000 x 3000 array on the cluster at argv[1]: exactly N(N-1)/2.
#include <pclient/client.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  try {
    pclient::ConnectOptions options;
    options.address = argv[1];
    options.name = "consumer";
    pclient::Client client = pclient::Client::connect(options);
    client.wait_for_workers(1, 20000);
    pclient::Job job;
    job.rows = 2000;
    job.cols = 3000;
    job.chunk_rows = 500;
    job.chunk_cols = 700;
    job.generator = "arange";
    job.param0 = 0;
    job.param1 = 1;
    job.offset = 0;
    job.row_step = 1;
    job.col_step = 1;
    pclient::Result r = client.run(job);
    const double n = 2000.0 * 3000.0;
    const double expected = n * (n - 1) / 2;
    std::printf("consumer: sum %.0f (expected %.0f), count %llu, %llu chunks\n", r.sum, expected,
                (unsigned long long)r.count, (unsigned long long)r.chunks);
    return r.sum == expected && r.count == 6000000 ? 0 : 1;
  } catch (const pclient::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
EOF
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$T/consumer" -B "$T/consumer/build" "${generator[@]}" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$T/consumer.log" 2>&1 || { cat "$T/consumer.log"; fail "consumer: cmake configure"; }
cmake --build "$T/consumer/build" >>"$T/consumer.log" 2>&1 || { cat "$T/consumer.log"; fail "consumer: build"; }

pkg_consumer=""
if command -v pkg-config >/dev/null; then
  say "the same consumer with pkg-config"
  read -r -a flags < <(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs pclient)
  c++ -std=c++17 -O1 -o "$T/consumer-pc" "$T/consumer/main.cpp" "${flags[@]}" ||
    fail "consumer: pkg-config build (${flags[*]})"
  pkg_consumer=$T/consumer-pc
fi

say "run it against the installed psched + pcuda-worker"
"$prefix/bin/psched" --host 127.0.0.1 --port 0 --dashboard-address none \
  --scheduler-file "$T/scheduler.json" >"$T/psched.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  [[ -s "$T/scheduler.json" ]] && break
  sleep 0.1
done
[[ -s "$T/scheduler.json" ]] || { cat "$T/psched.log"; fail "installed psched did not start"; }
address=$(sed -n 's/.*"address" *: *"\([^"]*\)".*/\1/p' "$T/scheduler.json")
"$prefix/bin/pcuda-worker" "$address" --backend cpu --nthreads 1 >"$T/worker.log" 2>&1 &
pids+=($!)
"$T/consumer/build/consumer" "$address" || { cat "$T/psched.log" "$T/worker.log"; fail "consumer (CMake)"; }
if [[ -n "$pkg_consumer" ]]; then
  "$pkg_consumer" "$address" || fail "consumer (pkg-config)"
fi
echo "PASS: cmake --install, find_package(pclient), pkg-config pclient"
