#!/usr/bin/env bash
# Installs what psched needs from Debian's packages (Debian 12 / Ubuntu 24.04), only what is missing.
#   deploy/install-deps.sh          build dependencies
#   deploy/install-deps.sh --test   build + test dependencies (what tests/run.sh uses)
# nvcc is optional: without it the build has the CPU backend only (see README).
set -euo pipefail

BUILD_PACKAGES=(
  cmake ninja-build g++ pkg-config
  libboost-dev            # Asio, Beast (header-only)
  capnproto libcapnp-dev  # the wire
  libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev
  libssl-dev              # TLS (OpenSSL 3; its static archives for the portable binaries)
  libzstd-dev libblosc-dev liblz4-dev libsnappy-dev zlib1g-dev  # Zarr chunks (static in portable builds)
  openssl                 # deploy/make-certs.sh
  python3-dev pybind11-dev  # the Python client (psched module); skipped where they are missing
)
TEST_PACKAGES=(
  catch2                  # unit and end-to-end tests
  procps psmisc           # pgrep/pkill/killall in the tests and the cleanup scripts
  clang libclang-rt-14-dev  # fuzzers and sanitizers
  curl                    # dashboard tests
  prometheus              # promtool check metrics, and a real Prometheus scraping psched
  chromium chromium-driver  # the dashboard's browser test
  libnss3-tools           # certutil: the HTTPS dashboard test trusts its CA in Chromium's NSS db
  openssh-server openssh-client  # deploy/ssh tests against a real sshd
  slurm-wlm munge         # deploy/slurm test on a single-node Slurm
  shellcheck iproute2 python3-yaml  # script lint, network namespaces, manifest checks
  python3-pytest python3-numpy python3-tqdm  # the Python client's tests (tests/python)
  python3-zarr python3-numcodecs python3-dask  # stored arrays written as users write them; Dask beside us
  python3-nbclient python3-nbformat python3-ipykernel  # its notebook, run headless
)

packages=("${BUILD_PACKAGES[@]}")
if [[ "${1:-}" == "--test" ]]; then
  packages+=("${TEST_PACKAGES[@]}")
elif [[ -n "${1:-}" ]]; then
  echo "usage: $0 [--test]" >&2
  exit 2
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: everything is installed"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
