"""psched.Result: a finished job's figures. It is a float (the value of the reduction asked
for: sum, mean, min, max or count) that also carries every figure the job produced."""


def device_figures(before, after, wall_seconds):
    """Each worker's share of one job from its counters just before and just after it (a worker
    that joined meanwhile counts from zero): chunks, busy seconds (its own timings, summed over a
    CPU worker's threads) and busy fraction of the job's wall time per thread."""
    earlier = {w["id"]: w for w in before or []}
    out = []
    for w in after:
        b = earlier.get(w["id"], {"chunks_done": 0, "busy_seconds": 0.0})
        busy = w["busy_seconds"] - b["busy_seconds"]
        out.append({"name": w["name"], "host": w["host"], "backend": w["backend"], "device": w["device"],
                    "chunks": w["chunks_done"] - b["chunks_done"], "busy_seconds": busy,
                    "busy_fraction": busy / wall_seconds / max(1, w["threads"]) if wall_seconds > 0 else 0.0})
    return out


class Result(float):
    """sum (the correctly rounded exact sum: the same bits whatever the chunking, workers or
    backend), exact_terms (that exact sum as non-overlapping floats, largest first, whose unrounded
    sum it is; fractions.Fraction of each adds up exactly), mean, count, min, max; seconds (submit
    to result, this client's clock), scheduler_seconds, chunks, workers (that computed chunks),
    retries, resubmissions (after a lost scheduler connection, Client(reconnect=...)), job_id, bytes (the
    array's), devices (per-worker figures, see device_figures), kind (what float(self) is) and,
    for verify jobs, verified_chunks, same_worker_chunks, mismatch_count and mismatches (each
    {chunk, copies: [{worker, device, sum, suspect}]})."""

    def __new__(cls, kind, figures, devices, nbytes):
        count = figures["count"]
        mean = figures["sum"] / count if count else float("nan")
        value = {"sum": figures["sum"], "mean": mean, "min": figures["min"], "max": figures["max"],
                 "count": float(count)}[kind]
        self = super().__new__(cls, value)
        self.kind = kind
        self.sum, self.count, self.mean = figures["sum"], count, mean
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
        return "\n".join(lines)
