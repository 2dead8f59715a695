"""psched.Result: a finished job's figures. It is a float (the value of the reduction asked
for: sum, mean, min, max or count) that also carries every figure the job produced."""


class Result(float):
    """The job result with the keys of pbench --json as attributes (one writer: client/result_json.h;
    the README's "The job result as JSON" lists them all), among them: sum (the correctly rounded exact sum: the
    same bits whatever the chunking, workers or backend), exact_terms (that exact sum as
    non-overlapping floats, largest first, whose unrounded sum it is; fractions.Fraction of each
    adds up exactly), mean (nan for an empty selection), count, min, max; seconds (submit to result,
    this client's clock), scheduler_seconds, chunks, bytes (the array's), energy_joules and
    joules_per_tb (the GPUs' energy on the job from NVML; None without it), workers (that computed
    chunks), retries, resubmissions (after a lost scheduler connection, Client(reconnect=...)),
    job_id, kind (what float(self) is), devices, stragglers and, for verify jobs, verified_chunks,
    same_worker_chunks, mismatch_count and mismatches (each {chunk, chunks, note, copies: [{worker_id,
    worker, device, sum, count, min, max, suspect, exact_terms, and squares_terms in a var/std job}]}:
    chunks chunk .. chunk + chunks - 1, one chunk once the scheduler narrowed the mismatch down). x.var(ddof) and x.std(ddof) jobs
    also carry var and std (exact: core/variance.h) and ddof.

    devices: the workers after the job (the keys of Client.workers(): name, host, backend, device,
    ..., gpu, the worker's latest NVML health or None without NVML), each with its share of the job
    by its own timings (run_chunks, run_busy_seconds, run_busy_fraction: busy time over the job's
    wall time per thread) and, when it took part, "run", the scheduler's view of it (worker_id,
    worker, host, device, chunks, bytes, busy_seconds, energy_joules, bytes_per_second, busy_share, slow, cause,
    and gpu: None, or uuid, {min, mean, max} of sm_clock_mhz, temperature_c, power_watts and
    sm_utilisation_pct over the job, sm_clock_max_mhz, throttle_reasons, throttle (their names)
    and series, one [seconds, sm_clock_mhz, temperature_c, power_watts, sm_utilisation_pct] per
    heartbeat as in pbench --report-json). Empty with devices=False (no round trips for it).
    stragglers: [{worker, host, cause}] for each device 10% or more below the job's median
    throughput (set even with devices=False). Figures NaN or infinite are floats here (null in
    pbench's JSON text)."""

    def __new__(cls, kind, figures):
        count = figures["count"]
        mean = figures["mean"] if figures["mean"] is not None else float("nan")
        # mean and count as floats here; every other figure is its key of the document
        value = {"mean": mean, "count": float(count)}.get(kind, figures.get(kind))
        self = super().__new__(cls, value)
        self.__dict__.update(figures)  # every key of the document, as an attribute
        self.kind, self.mean = kind, mean
        verify = figures.get("verify", {})
        self.verified_chunks = verify.get("verified_chunks", 0)
        self.same_worker_chunks = verify.get("same_worker_chunks", 0)
        self.mismatch_count, self.mismatches = verify.get("mismatch_count", 0), verify.get("mismatches", [])
        return self

    def __reduce__(self):  # pickles as the plain number
        return (float, (float(self),))

    def summary(self):
        lines = [f"{self.kind}: {float(self)!r}",
                 f"sum {self.sum!r}  mean {self.mean!r}  count {self.count}  min {self.min!r}  max {self.max!r}",
                 f"{self.seconds:.6f} s for {self.bytes / 1e9:.3f} GB ({self.bytes / max(self.seconds, 1e-12) / 1e9:.2f}"
                 f" GB/s) over {self.chunks} chunks on {self.workers} workers"]
        for d in self.devices:
            lines.append(f"  {d['name']}: {d['backend']} {d['device']}, {d['run_chunks']} chunks, "
                         f"busy {100 * d['run_busy_fraction']:.0f}%")
            gpu = (d.get("run") or {}).get("gpu")
            if gpu:
                lines.append(f"    SM clock {gpu['sm_clock_mhz']['mean']:.0f} MHz (max {gpu['sm_clock_max_mhz']}), "
                             f"{gpu['temperature_c']['max']:.0f} C, {gpu['power_watts']['mean']:.0f} W, "
                             f"util {gpu['sm_utilisation_pct']['mean']:.0f}%"
                             + (f", throttled: {gpu['throttle']}" if gpu["throttle"] else ""))
        for s in self.stragglers:
            lines.append(f"  straggler {s['worker']}: {s['cause'] or 'no cause seen by NVML'}")
        return "\n".join(lines)
