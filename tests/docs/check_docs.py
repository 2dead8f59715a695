#!/usr/bin/python3
"""The docs say what the code does: run by CTest (tests/CMakeLists.txt).

1. Every repository path a tracked text file names (a comment, a doc, a script) exists.
2. Every option default that docs/design.md or README.md states ("`--max-jobs` (65536)",
   "`--max-frame`, default 16 MiB") is the one the binary's --help prints.
3. Every constant docs/design.md names (`kName`, `Job::kName`) has its value stated within the
   same sentence or two ("2 ms (`kMinGiveBackGainSeconds`)", "2^16 chunks") as the code defines
   it, when the code's definition is a plain number.
4. The libraries go one way, as docs/design.md's "Layout" says: a file in core/ includes nothing
   from net/ or app/, one in net/ nothing from app/, and none of them from scheduler/, worker/ or
   client/.
5. Every `Type::member` and `kName` a code comment, docs/design.md or README.md writes names
   something the code declares, where the type is one of ours (tests/docs/names.py).

  check_docs.py SOURCE_DIR BIN_DIR
Prints each mismatch on one line and exits 1 if there is any.
"""
import os
import re
import subprocess
import sys

import names

src, bin_dir = sys.argv[1], os.path.abspath(sys.argv[2])
os.chdir(src)
problems = []

listing = subprocess.run(["git", "ls-files"], capture_output=True, text=True)
if listing.returncode != 0:
    print("not a git checkout: no file list to check (skipped)")
    sys.exit(77)
files = listing.stdout.split()
tracked = set(files)
dirs = {f.rsplit("/", i)[0] for f in files for i in range(1, f.count("/") + 1)}
text_file = re.compile(r"\.(h|cpp|cu|cuh|py|sh|md|capnp|txt|cmake|sbatch|yaml|yml)$|CMakeLists\.txt$")


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


# 1. Paths.
path_re = re.compile(r"(?<![\w./$-])((?:core|net|app|scheduler|worker|client|tests|bench|deploy|docs|proto|python|examples|\.ci)"
                     r"/[\w./*{}-]*[\w*}])")
for f in files:
    if not text_file.search(f):
        continue
    for m in path_re.finditer(read(f)):
        p = m.group(1).rstrip(".")
        if any(c in p for c in "*{}") or p.startswith("proto/psched.capnp.") or p in tracked or p in dirs:
            continue
        if os.path.exists(p):  # not committed yet (a working tree); a clean clone has it tracked
            continue
        # Placeholders in examples: an upper-case part (deploy/ssh/remote/SCRIPT) or x.cpp.
        if any(part.isupper() for part in p.split("/")) or p.endswith("/x.cpp"):
            continue
        problems.append(f"{f}: names {p}, which does not exist")

# 2. Option defaults, from the binaries' --help.
defaults = {}
for binary in ("psched", "pcuda-worker", "pbench"):
    help_text = subprocess.run([os.path.join(bin_dir, binary), "--help"], capture_output=True, text=True).stdout
    for m in re.finditer(r"^\s+(?:-\w, )?(--[\w-]+) [^\n=]*?=([\w.]+)", help_text, re.M):
        defaults.setdefault(m.group(1), set()).add(m.group(2))
    for m in re.finditer(r"^\s+(?:-\w, )?(--[\w-]+)[^\n]*\(default:? ([\d.]+)", help_text, re.M):
        defaults.setdefault(m.group(1), set()).add(m.group(2))

unit_scale = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def number(text, unit=""):
    return float(text) * unit_scale.get(unit, 1)


option_re = re.compile(r"`(--[\w-]+)`(?: \((?:default:? )?|, default )([\d.]+)(?: (KiB|MiB|GiB))?")
for doc in ("docs/design.md", "README.md"):
    body = read(doc)
    for m in option_re.finditer(body):
        option, stated = m.group(1), number(m.group(2), m.group(3) or "")
        if option not in defaults:
            problems.append(f"{doc}: states a default for {option}, which no binary's --help shows")
        elif not any(float(d) == stated for d in defaults[option] if re.fullmatch(r"[\d.]+", d)):
            problems.append(f"{doc}: says {option} defaults to {m.group(0).split('`')[-1].strip(' (,')}, "
                            f"--help says {', '.join(sorted(defaults[option]))}")

# 3. Named constants in docs/design.md.
sources = {f: read(f) for f in files if re.search(r"\.(h|cpp|cuh|cu)$", f)}


def constant_value(name):
    """The constant's value and kind ('us', 'ms', 's' for durations), or None if not a plain number."""
    for text in sources.values():
        m = re.search(r"\b" + name + r"\s*(?:=\s*([^;]+);|\{([^}]*)\};)", text)
        if not m:
            continue
        expr = (m.group(1) or m.group(2)).strip()
        decl = text[max(0, m.start() - 120):m.start()]
        kind = "us" if "microseconds" in decl else "ms" if "milliseconds" in decl else ""
        expr = re.sub(r"(?:uint64_t|uint32_t|size_t|int64_t)\{(\d+)\}", r"\1", expr)
        expr = re.sub(r"std::chrono::\w+\{(\d+)\}", r"\1", expr)
        expr = re.sub(r"(\d)(?:ull|ULL|u|U|ll|LL)\b", r"\1", expr)
        if not re.fullmatch(r"[\d. <*+()e-]+", expr):
            return None
        try:
            return float(eval(expr, {"__builtins__": {}})), kind  # digits and operators only
        except Exception:
            return None
    return None


def renderings(value, kind):
    """The numbers a doc may write for a value: itself, 2^k, and durations in other units."""
    out = {value}
    if value > 0 and float(value).is_integer() and (int(value) & (int(value) - 1)) == 0:
        out.add(("pow", int(value).bit_length() - 1))
    seconds = {"us": value * 1e-6, "ms": value * 1e-3}.get(kind, value)
    out |= {seconds, seconds * 1e3, seconds * 1e6}
    if value >= 1 << 10:
        out |= {value / (1 << 10), value / (1 << 20)}
    if 0 < value < 1:
        out.add(value * 100)  # a share as a percentage
    return out


design = read("docs/design.md")
words = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "eight": 8, "ten": 10}
stated_re = re.compile(r"(?<![\w.])2\^(\d+)|(?<![\w.^])(\d+(?:[.,]\d+)*)(?![\w^])")
for m in re.finditer(r"`(?:\w+::)?(k[A-Z]\w+)`", design):
    found = constant_value(m.group(1))
    if found is None:
        continue
    value, kind = found
    # The sentence or two around the mention.
    window = design[max(0, m.start() - 200):m.end() + 200]
    allowed = renderings(value, kind)
    stated = []
    for word, n in words.items():
        if re.search(r"\b" + word + r"\b", window, re.I):
            stated.append(float(n))
    for s in stated_re.finditer(window):
        if s.group(1):
            stated.append(("pow", int(s.group(1))))
        else:
            stated.append(float(s.group(2).replace(",", "")))
    if not any(x in allowed or (isinstance(x, float) and any(isinstance(a, float) and abs(a - x) <= 1e-9 * max(1, abs(a))
                                                              for a in allowed)) for x in stated):
        problems.append(f"docs/design.md: `{m.group(1)}` is {value:g} in the code; no number near its mention says so")

# 4. Layers.
layers = ["core", "net", "app"]
above = {"scheduler", "worker", "client", "bench", "tests", "python"}
include_re = re.compile(r'^#include "(\w+)/', re.M)
for f in files:
    top = f.split("/", 1)[0]
    if top not in layers or not re.search(r"\.(h|cpp|cu|cuh)$", f):
        continue
    for m in include_re.finditer(read(f)):
        lib = m.group(1)
        if lib in above or (lib in layers and layers.index(lib) > layers.index(top)):
            problems.append(f"{f}: includes {lib}/, which is above {top}/ (core <- net <- app)")

# 5. Names in comments and docs.
problems += names.stale_names(files, read)

for p in problems:
    print(p)
if problems:
    sys.exit(1)
print(f"docs check: {len(files)} files' paths and the libraries' layers, {sum(1 for _ in option_re.finditer(read('docs/design.md')))} option "
      f"defaults in docs/design.md, constants named there, `Type::member` names in comments: all match the code")
