"""psched.Result: a finished job's figures. It is a float (the value of the reduction asked
for: sum, mean, min, max or count) that also carries every figure the job produced."""


def device_figures(before, after, wall_seconds, runs=()):
    """Each worker's share of one job from its counters just before and just after it (a worker
    that joined meanwhile counts from zero): chunks, busy seconds (its own timings, summed over a
    CPU worker's threads) and busy fraction of the job's wall time per thread; gpu, its GPU's latest
    NVML health (None without NVML: CPU workers, no driver library); run, how the scheduler saw it
    do in the job (the entry of `runs` with its worker_id; None when it took no part)."""
    earlier = {w["id"]: w for w in before or []}
    by_worker = {r["worker_id"]: r for r in runs}
    out = []
    for w in after:
        b = earlier.get(w["id"], {"chunks_done": 0, "busy_seconds": 0.0})
        busy = w["busy_seconds"] - b["busy_seconds"]
        out.append({"name": w["name"], "host": w["host"], "backend": w["backend"], "device": w["device"],
                    "chunks": w["chunks_done"] - b["chunks_done"], "busy_seconds": busy,
                    "busy_fraction": busy / wall_seconds / max(1, w["threads"]) if wall_seconds > 0 else 0.0,
                    "gpu": w.get("gpu"), "run": by_worker.get(w["id"])})
    return out


class Result(float):
    """sum (the correctly rounded exact sum: the same bits whatever the chunking, workers or
    backend), exact_terms (that exact sum as non-overlapping floats, largest first, whose unrounded
    sum it is; fractions.Fraction of each adds up exactly), mean, count, min, max; seconds (submit
    to result, this client's clock), scheduler_seconds, chunks, workers (that computed chunks),
    retries, resubmissions (after a lost scheduler connection, Client(reconnect=...)), job_id, bytes (the
    array's), devices (per-worker figures, see device_figures), kind (what float(self) is) and,
    for verify jobs, verified_chunks, same_worker_chunks, mismatch_count and mismatches (each
    {chunk, chunks, copies: [{worker, device, sum, suspect}]}: chunks chunk .. chunk + chunks - 1,
    one chunk once the scheduler narrowed the mismatch down).

    GPU health and stragglers, with the keys of pbench --json: devices[i]["gpu"] is the worker's
    latest NVML health (uuid, pci_bus_id, sm_utilisation_pct, mem_utilisation_pct,
    memory_used_bytes, memory_total_bytes, sm_clock_mhz, sm_clock_max_mhz, temperature_c,
    power_watts, power_limit_watts, throttle_reasons, ecc_supported, ecc_corrected,
    ecc_uncorrected, pcie_generation, pcie_width, pcie_max_width), None without NVML;
    devices[i]["run"] is the scheduler's view of its job (worker_id, worker, host, device, chunks,
    bytes, busy_seconds, bytes_per_second, busy_share, slow, cause, and gpu: None, or uuid,
    {min, mean, max} of sm_clock_mhz, temperature_c, power_watts and sm_utilisation_pct over the
    job, sm_clock_max_mhz, throttle_reasons, throttle (their names) and series, one
    [seconds, sm_clock_mhz, temperature_c, power_watts, sm_utilisation_pct] per heartbeat as in
    pbench --report-json). stragglers: [{worker, host, cause}] for each device 10% or more below
    the job's median throughput (set even with devices=False).

    x.var(ddof) and x.std(ddof) jobs also carry var and std (exact: core/variance.h) and ddof."""

    def __new__(cls, kind, figures, devices, nbytes, ddof=0):
        count = figures["count"]
        mean = figures["sum"] / count if count else float("nan")
        var = figures["var"](ddof) if "var" in figures else None
        std = figures["std"](ddof) if "std" in figures else None
        value = {"sum": figures["sum"], "mean": mean, "min": figures["min"], "max": figures["max"],
                 "count": float(count), "var": var, "std": std}[kind]
        self = super().__new__(cls, value)
        self.kind = kind
        self.sum, self.count, self.mean = figures["sum"], count, mean
        if var is not None:
            self.var, self.std, self.ddof = var, std, ddof
        self.exact_terms = list(figures.get("exact_terms", []))
        self.min, self.max = figures["min"], figures["max"]
        self.seconds = figures["wall_seconds"]
        self.scheduler_seconds = figures["scheduler_seconds"]
        self.chunks, self.workers, self.retries = figures["chunks"], figures["workers"], figures["retries"]
        self.resubmissions = figures.get("resubmissions", 0)
        self.job_id = figures["job_id"]
        self.verified_chunks, self.same_worker_chunks = figures["verified_chunks"], figures["same_worker_chunks"]
        self.mismatch_count, self.mismatches = figures["mismatch_count"], figures["mismatches"]
        self.bytes = nbytes
        self.devices = devices
        self.stragglers = [{"worker": d["worker"], "host": d["host"], "cause": d["cause"]}
                           for d in figures.get("devices", []) if d["slow"]]
        return self

    def __reduce__(self):  # pickles as the plain number
        return (float, (float(self),))

    def summary(self):
        lines = [f"{self.kind}: {float(self)!r}",
                 f"sum {self.sum!r}  mean {self.mean!r}  count {self.count}  min {self.min!r}  max {self.max!r}",
                 f"{self.seconds:.6f} s for {self.bytes / 1e9:.3f} GB ({self.bytes / max(self.seconds, 1e-12) / 1e9:.2f}"
                 f" GB/s) over {self.chunks} chunks on {self.workers} workers"]
        for d in self.devices:
            lines.append(f"  {d['name']}: {d['backend']} {d['device']}, {d['chunks']} chunks, "
                         f"busy {100 * d['busy_fraction']:.0f}%")
            gpu = (d.get("run") or {}).get("gpu")
            if gpu:
                lines.append(f"    SM clock {gpu['sm_clock_mhz']['mean']:.0f} MHz (max {gpu['sm_clock_max_mhz']}), "
                             f"{gpu['temperature_c']['max']:.0f} C, {gpu['power_watts']['mean']:.0f} W, "
                             f"util {gpu['sm_utilisation_pct']['mean']:.0f}%"
                             + (f", throttled: {gpu['throttle']}" if gpu["throttle"] else ""))
        for s in self.stragglers:
            lines.append(f"  straggler {s['worker']}: {s['cause'] or 'no cause seen by NVML'}")
        return "\n".join(lines)
