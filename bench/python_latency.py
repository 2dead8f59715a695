#!/usr/bin/python3
"""Tiny-job latency through the Python client against pbench's, in one run on one cluster:
    bench/python_latency.py [BIN_DIR]        (default build/bin; the module from BIN_DIR/../python)
The job of bench/cpu.sh's latency figure: constant 1 + 1 over 1 x 1000 elements in 10 chunks of
100, on a running cluster (psched + 2 CPU workers of 1 thread). pbench --repeat 30 gives its
median (its own submit-to-result clock); Python runs the same job 30 times, timed around
.compute() (everything a notebook user waits for), plain (progress=False, devices=False) and with
compute()'s defaults (devices=True: two more round trips for the per-device figures). The three
alternate for ROUNDS rounds (default 3) so that a neighbour's load hits them alike; the medians of
all runs and the differences are printed."""

import json
import os
import statistics
import subprocess
import sys
import time

RUNS = 30
ROUNDS = int(os.environ.get("ROUNDS", 3))


def main():
    bin_dir = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/bin")
    sys.path.insert(0, os.path.join(os.path.dirname(bin_dir), "python"))
    import psched
    import psched.array as pa

    with psched.LocalCluster(cpus=2, threads_per_worker=1, dashboard=False, bin_dir=bin_dir) as cluster:
        client = psched.Client(cluster)
        x = pa.ones(1000, chunks=100) + 1
        job = x.sum()
        assert job.compute(devices=False).count == 1000  # warm-up: workers have seen a job

        def pbench_runs():
            out = subprocess.run([os.path.join(bin_dir, "pbench"), "-d", "--scheduler-file", cluster.scheduler_file,
                                  "-q", "--json", "-x", "1", "-y", "1000", "--chunk-x", "1", "--chunk-y", "100",
                                  "--row-step", "1", "--col-step", "1", "--generator", "constant",
                                  "--repeat", str(RUNS), "--check"], check=True, capture_output=True, text=True)
            r = json.loads(out.stdout)
            assert r["check"] == "ok" and r["sum"] == 2000.0
            return r["runs"]

        def python_runs(inner, **kwargs):
            runs = []
            for _ in range(RUNS):
                t0 = time.perf_counter()
                r = job.compute(**kwargs)
                runs.append(time.perf_counter() - t0)
                inner.append(r.seconds)
                assert r == 2000.0
            return runs

        pbench, plain, plain_inner, default = [], [], [], []
        for _ in range(ROUNDS):
            pbench += pbench_runs()
            plain += python_runs(plain_inner, progress=False, devices=False)
            default += python_runs([])
        client.close()

    def us(runs):
        return statistics.median(runs) * 1e6

    pb = us(pbench)
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"10-chunk job, median of {ROUNDS} x {RUNS} runs, one cluster (psched + 2 CPU workers):")
    print(f"  pbench --repeat {RUNS}:                              {pb:7.1f} us")
    print(f"  Python .compute(progress=False, devices=False): {us(plain):7.1f} us ({us(plain) - pb:+.1f} us, "
          f"{us(plain) / pb:.2f}x; libpclient's clock inside it {us(plain_inner):.1f} us)")
    print(f"  Python .compute() (defaults, per-device figures): {us(default):7.1f} us ({us(default) - pb:+.1f} us, "
          f"{us(default) / pb:.2f}x)")

if __name__ == "__main__":
    main()
