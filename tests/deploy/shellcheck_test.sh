#!/usr/bin/env bash
# Every shell script of the deployment kit and of these tests passes shellcheck (all severities).
#   usage: shellcheck_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
command -v shellcheck >/dev/null || { echo "SKIP: shellcheck not installed (deploy/install-deps.sh --test)"; exit 0; }
cd "$src"
mapfile -t scripts < <(find deploy tests/deploy -type f \( -name '*.sh' -o -name '*.sbatch' \) | sort)
((${#scripts[@]} >= 10)) || { echo "FAIL: found only ${#scripts[@]} scripts"; exit 1; }
printf '%s\n' "${scripts[@]}"
shellcheck --version | sed -n 2p
shellcheck -x "${scripts[@]}"
echo "PASS: shellcheck, ${#scripts[@]} scripts"
