# shellcheck shell=bash
# Sourced by the benchmarks: their checks read pbench's JSON (and the scheduler file) with a JSON
# parser, python3's json module, never with grep. pbench prints its keys in sorted order, so the
# first "min" or "seconds" in the text can be a device's NVML figure, not the job's (issue 46:
# gpu.sh's one-pass check compared a power reading and failed a correct run).
#   json_field JSON PATH  the value at PATH in the JSON text, PATH being keys and list indexes
#       joined by '.', '*' for every element of a list or object: "sum", "devices.0.name",
#       "devices.*.run_busy_fraction". A string prints as itself, a number as Python's repr (the
#       shortest text that reads back to the same double, so two equal doubles print the same), true/false/null as
#       JSON spells them, a list of scalars one element a line, anything else as compact JSON; a
#       missing key or unparsable text prints nothing and returns 1.
#   json_file_field FILE PATH  the same, read from FILE.
#   json_len JSON PATH  the length of the list or object at PATH ("" for the whole document).
# python3 is on both machines (on the GPU host a venv with the standard library alone).
_json_py='
import json, sys
def scalar(v):
    if isinstance(v, bool): return "true" if v else "false"
    if v is None: return "null"
    if isinstance(v, str): return v
    if isinstance(v, (int, float)): return repr(v)
    return json.dumps(v, separators=(",", ":"))
def walk(v, keys):
    if not keys: yield v; return
    k, rest = keys[0], keys[1:]
    if k == "*":
        items = v.values() if isinstance(v, dict) else (v if isinstance(v, list) else [])
        for x in items: yield from walk(x, rest)
    elif isinstance(v, dict):
        if k in v: yield from walk(v[k], rest)
    elif isinstance(v, list) and k.lstrip("-").isdigit() and -len(v) <= int(k) < len(v):
        yield from walk(v[int(k)], rest)
mode, path = sys.argv[1], sys.argv[2]
try:
    doc = json.loads(sys.stdin.read())
except ValueError:
    sys.exit(1)
found = list(walk(doc, path.split(".") if path else []))
if not found: sys.exit(1)
for v in found:
    if mode == "len": print(len(v) if isinstance(v, (list, dict)) else 0)
    elif isinstance(v, list) and all(not isinstance(x, (list, dict)) for x in v):
        for x in v: print(scalar(x))
    else: print(scalar(v))
'
json_field() { python3 -c "$_json_py" field "$2" <<<"$1"; }
json_file_field() { python3 -c "$_json_py" field "$2" <"$1"; }
json_len() { python3 -c "$_json_py" len "$2" <<<"$1"; }
