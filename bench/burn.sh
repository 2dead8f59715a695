#!/usr/bin/env bash
# Issue 47's targets for the acceptance run on a GPU host, in one call:
#   bench/burn.sh BIN_DIR [GPUS] [DURATION] [OUT_DIR]      (defaults: every GPU, 2m)
# 1. The DeepOps benchmark on GPUS GPUs, plain and with --verify 1.0 (every chunk computed on two
#    GPUs), two rounds in turns: verified time over plain. Each GPU's verified throughput within 5%
#    of half its plain one is a ratio of at most 2 / 0.95 = 2.105.
# 2. pbench -g GPUS --burn DURATION with its JSON and HTML reports: the verdict must be pass (exit 0)
#    and every GPU busy >= 95 % of the burn by its own timings (busy seconds over its time in it).
# 3. The energy of the plain run (NVML), per TB.
# Exits non-zero if any check fails.
set -uo pipefail
bin=$(cd "${1:?usage: bench/burn.sh BIN_DIR [GPUS] [DURATION] [OUT_DIR]}" && pwd)
gpus=${2:-$(nvidia-smi -L | wc -l)}
duration=${3:-2m}
out=${4:-$(mktemp -d)}
mkdir -p "$out"
status=0
fail() { echo "FAIL: $*"; status=1; }
# shellcheck source=bench/lib/json.sh
source "$(dirname "$0")/lib/json.sh"

echo "== DeepOps on $gpus GPU(s), plain and verified, in turns"
for round in 1 2; do
  "$bin/pbench" -g "$gpus" --json >"$out/plain$round.json" || fail "plain DeepOps run"
  "$bin/pbench" -g "$gpus" --json --verify 1.0 >"$out/verified$round.json" || fail "verified DeepOps run"
  echo "round $round: plain $(json_file_field "$out/plain$round.json" seconds) s," \
       "verified $(json_file_field "$out/verified$round.json" seconds) s"
done
python3 - "$out" <<'PY' || fail "verified over plain"
import json, sys
out = sys.argv[1]
plain = [json.load(open(f"{out}/plain{r}.json")) for r in (1, 2)]
verified = [json.load(open(f"{out}/verified{r}.json")) for r in (1, 2)]
p, v = min(j["seconds"] for j in plain), min(j["seconds"] for j in verified)
same = len({j["sum"] for j in plain + verified}) == 1
print(f"DeepOps best of 2: plain {p:.3f} s, verified {v:.3f} s: {v / p:.3f} x (target <= 2.105); same sum: {same}")
best = min(plain, key=lambda j: j["seconds"])
if best["energy_joules"] is not None:
    print(f"energy of the best plain run: {best['energy_joules']:.0f} J, {best['joules_per_tb']:.0f} J per TB, "
          f"{best['energy_joules'] / best['seconds']:.0f} W over its wall time")
sys.exit(0 if v / p <= 2 / 0.95 and same else 1)
PY

echo "== burn-in: pbench -g $gpus --burn $duration"
"$bin/pbench" -g "$gpus" --burn "$duration" --json --burn-report "$out/burn.html" >"$out/burn.json" 2>"$out/burn.stderr"
burn_status=$?
[[ $burn_status -eq 0 ]] || fail "burn-in exited $burn_status (0: every GPU passed)"
tail -n 20 "$out/burn.stderr"
python3 - "$out/burn.json" <<'PY' || fail "busy share below 95 % or report unreadable"
import json, sys
report = json.load(open(sys.argv[1]))
seconds = report["burn"]["seconds"]
ok = True
for g in report["gpus"]:
    end = g["left_seconds"] if g["left_seconds"] is not None else seconds
    busy = g["busy_seconds"] / max(end - g["joined_seconds"], 1e-9)
    print(f"{g['worker']} ({g['device']}): {g['verdict']}, busy {100 * busy:.1f} % of {end - g['joined_seconds']:.1f} s, "
          f"{g['bytes_per_second'] / 1e9:.1f} GB/s of its compute time")
    ok &= busy >= 0.95
print(f"burn: {report['burn']['verdict']}, {report['burn']['jobs']} jobs, {report['burn']['verified_chunks']} chunks verified")
sys.exit(0 if ok else 1)
PY
exit $status
