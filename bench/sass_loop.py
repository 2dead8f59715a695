#!/usr/bin/python3
"""How many instructions a kernel's main loop issues per iteration, from cuobjdump's SASS.

    cuobjdump -sass BIN | bench/sass_loop.py PATTERN [--list]

For every function whose mangled name contains PATTERN: the longest loop (the span from a
backward branch's target to the branch) with its instruction count and the count of each opcode,
and with --list the loop's instructions. Generation is bound by the instructions it issues
(bench/README.md), so this count is the figure to move; cuobjdump is in the CUDA toolkit on the
GPU machine (not on the build VM). Example, the normal generator's loop (four Philox blocks, eight
elements, an iteration):

    cuobjdump -sass build/bin/cuda-floor | bench/sass_loop.py generate_normal_pairs_kernelILi4EdE
"""
import collections
import re
import sys

INSTRUCTION = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
BRANCH = re.compile(r"\bBRA\b(?:\s+`\(\.L_x_\d+\))?\s+0x([0-9a-f]+)")


def functions(lines):
    """(name, [(address, text)]) for each function of the dump."""
    name, body = None, []
    for line in lines:
        if "Function :" in line:
            if name is not None:
                yield name, body
            name, body = line.split("Function :", 1)[1].strip(), []
        elif name is not None:
            m = INSTRUCTION.match(line)
            if m:
                body.append((int(m.group(1), 16), m.group(2)))
    if name is not None:
        yield name, body


def longest_loop(body):
    best = None
    for address, text in body:
        m = BRANCH.search(text)
        if m and int(m.group(1), 16) < address:
            start = int(m.group(1), 16)
            if best is None or address - start > best[1] - best[0]:
                best = (start, address)
    if best is None:
        return []
    return [(a, t) for a, t in body if best[0] <= a <= best[1]]


def opcode(text):
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0]


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: cuobjdump -sass BIN | bench/sass_loop.py PATTERN [--list]")
    pattern, listing = sys.argv[1], "--list" in sys.argv[2:]
    found = False
    for name, body in functions(sys.stdin):
        if pattern not in name:
            continue
        found = True
        loop = longest_loop(body)
        counts = collections.Counter(opcode(t) for _, t in loop)
        print(f"{name}: {len(body)} instructions, loop {len(loop)}")
        print("  " + " ".join(f"{op} {n}" for op, n in counts.most_common()))
        if listing:
            for address, text in loop:
                print(f"  {address:#06x} {text}")
    if not found:
        sys.exit(f"sass_loop.py: no function's name contains {pattern}")


if __name__ == "__main__":
    main()
