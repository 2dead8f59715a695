#!/usr/bin/env bash
# deploy/docker/Dockerfile, linted without a Docker engine (none here: the image is not built by
# the tests): hadolint where installed, and in any case the structure the README promises.
#   docker_lint_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
df=$src/deploy/docker/Dockerfile
fail() { echo "FAIL: $*"; exit 1; }

if command -v hadolint >/dev/null; then
  hadolint "$df"
  echo "hadolint: ok"
else
  echo "note: hadolint not installed (no Debian package): structural checks only"
fi
froms=$(grep -Ec '^FROM ' "$df")
((froms >= 2)) || fail "not multi-stage ($froms FROM lines)"
grep -Eq '^FROM nvidia/cuda:\S*-devel-\S* AS build$' "$df" || fail "build stage: nvidia/cuda devel image AS build"
last_from=$(grep -En '^FROM ' "$df" | tail -n 1)
[[ "$last_from" =~ FROM\ nvidia/cuda:[^[:space:]]*-(base|runtime)- ]] || fail "runtime stage: $last_from"
runtime=$(sed -n "${last_from%%:*},\$p" "$df")
grep -q 'deploy/install-deps.sh' "$df" || fail "the build stage does not use deploy/install-deps.sh"
grep -q 'COPY --from=build' <<<"$runtime" || fail "runtime stage copies nothing from the build"
user=$(grep -E '^USER ' <<<"$runtime" | tail -n 1)
[[ -n "$user" ]] || fail "runtime stage runs as root (no USER)"
[[ ! "$user" =~ ^USER\ (0|root)(:|$) ]] || fail "runtime USER is root: $user"
grep -Eq '^EXPOSE 8786 8787$' <<<"$runtime" || fail "no EXPOSE 8786 8787"
for b in psched pcuda-worker pbench; do
  grep -q "$b" "$df" || fail "$b not mentioned"
done
grep -Eq '^(CMD|ENTRYPOINT) ' <<<"$runtime" || fail "no CMD"
[[ -f "$src/deploy/docker/Dockerfile.dockerignore" ]] || fail "no Dockerfile.dockerignore"
echo "PASS: deploy/docker/Dockerfile (static checks; not built: no Docker engine here)"
