#!/usr/bin/python3
"""The DeepOps benchmark (2 TB) from Python against pbench's, in one run on one GPU cluster:
    bench/python_deepops.py BIN_DIR [PACKAGE_DIR]
BIN_DIR holds psched, pcuda-worker and pbench; PACKAGE_DIR the directory holding the psched package
(default BIN_DIR/../python). One psched.LocalCluster(gpus=1) runs both: the notebook form
`(x + 1)[::2, ::2].sum().compute()` timed around compute() (everything a notebook user waits for), and
`pbench -d --scheduler-file` on the same cluster (its submit-to-result clock, the figure README quotes)
alternate for ROUNDS rounds (default 3) so drift hits both alike. Prints both medians and the ratio
(issue 17's target: Python within 2% of pbench), and checks the two sums are the same bits.
SIZE/CHUNK (environment) shrink the job, e.g. for a CPU smoke run with GPUS=0."""

import json
import os
import statistics
import subprocess
import sys
import time

ROUNDS = int(os.environ.get("ROUNDS", 3))
SIZE = int(os.environ.get("SIZE", 500000))
CHUNK = int(os.environ.get("CHUNK", 10000))
GPUS = int(os.environ.get("GPUS", 1))


def main():
    bin_dir = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/bin")
    package_dir = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.path.join(bin_dir, "..", "python"))
    sys.path.insert(0, package_dir)
    import psched
    import psched.array as pa

    cluster = psched.LocalCluster(gpus=GPUS, dashboard=False, bin_dir=bin_dir) if GPUS else \
        psched.LocalCluster(cpus=2, dashboard=False, bin_dir=bin_dir)
    with cluster:
        client = psched.Client(cluster)
        x = pa.random.normal(10, 1, size=(SIZE, SIZE), chunks=(CHUNK, CHUNK), seed=0)
        total = (x + 1)[::2, ::2].sum()

        def python_run():
            t0 = time.perf_counter()
            r = total.compute(progress=False, devices=False)
            return time.perf_counter() - t0, r

        def pbench_run():
            out = subprocess.run([os.path.join(bin_dir, "pbench"), "-d", "--scheduler-file", cluster.scheduler_file,
                                  "-q", "--json", "-x", str(SIZE), "-y", str(SIZE), "--chunk-x", str(CHUNK),
                                  "--chunk-y", str(CHUNK), "--seed", "0"],
                                 check=True, capture_output=True, text=True)
            r = json.loads(out.stdout)
            return r["seconds"], r["sum"]

        python_run()  # warm-up: the worker has seen a job, its buffers are allocated
        py, pb, sums = [], [], set()
        for _ in range(ROUNDS):
            s, r = pbench_run()
            pb.append(s)
            sums.add(repr(float(r)))
            s, r = python_run()
            py.append(s)
            sums.add(repr(float(r)))
        client.close()

    p, b = statistics.median(py), statistics.median(pb)
    print(f"array {SIZE} x {SIZE} float64 in {CHUNK}^2 chunks, {'%d GPU' % GPUS if GPUS else '2 CPU workers'}, "
          f"median of {ROUNDS} runs each, one cluster:")
    print(f"  pbench (submit to result):            {b:.3f} s  runs {' '.join('%.3f' % v for v in pb)}")
    print(f"  Python total.compute() (wall around): {p:.3f} s  runs {' '.join('%.3f' % v for v in py)}")
    print(f"  ratio Python / pbench: {p / b:.4f} (target <= 1.02)")
    if len(sums) != 1:
        print(f"FAIL: the sums differ: {sorted(sums)}")
        return 1
    print(f"  same sum from both: {sums.pop()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
