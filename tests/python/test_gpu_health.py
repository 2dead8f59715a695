# GPU health and stragglers on psched.Result, with pbench --json's keys: on plain CPU workers (no
# NVML: every gpu is None) and on CPU workers that pcuda-worker's test-only switches point at the
# stand-in NVML library (tests/support/stand_in_nvml.cpp), one of them slowed by a per-chunk delay
# and thermally throttled, as tests/dashboard/gpu_health_test.cpp does with pbench.
import os

import pytest

psched = pytest.importorskip("psched")
pa = pytest.importorskip("psched.array")
from conftest import BIN_DIR, pbench_json  # noqa: E402

STAND_IN_NVML = os.path.join(BIN_DIR, "libstand_in_nvml.so")
UUID = "GPU-5a11d1e0-0000-4000-8000-{:012d}"


class StandInCluster(psched.LocalCluster):
    """CPU workers reporting the stand-in's GPU, each with its own extra environment; the scheduler
    asks for heartbeats every 400 ms (--worker-timeout 2), so a job of a second or two sees several."""

    def __init__(self, worker_env, threads_per_worker=1):
        self._worker_env = worker_env
        super().__init__(cpus=len(worker_env), threads_per_worker=threads_per_worker)

    def _specs(self, *args):
        specs = super()._specs(*args)
        specs[0][1].extend(["--worker-timeout", "2"])
        for (_, _, env), more in zip(specs[1:], self._worker_env):
            env.update({"PSCHED_TEST_NVML_LIBRARY": STAND_IN_NVML,
                        "PSCHED_TEST_NVML_PCI_BUS_ID": "00000000:3B:00.0", **more})
        return specs


def slowed_job():
    """400 chunks of 100 x 100: about 1.6 s on the two workers below."""
    return pa.arange(0, 2000 * 2000, chunks=2000 * 100).reshape(2000, 2000).rechunk((100, 100)).sum()


@pytest.fixture(scope="module")
def stand_in_cluster():
    if not os.path.exists(STAND_IN_NVML):
        pytest.skip(f"no stand-in NVML library at {STAND_IN_NVML}")
    # local-0 sleeps 5 ms a chunk, local-1 20 ms and its GPU reports hardware thermal slowdown.
    with StandInCluster([{"PSCHED_TEST_CHUNK_DELAY_MS": "5"},
                         {"PSCHED_TEST_CHUNK_DELAY_MS": "20", "STAND_IN_NVML_THROTTLE": "0x40",
                          "STAND_IN_NVML_ID": "2"}]) as c:
        yield c


@pytest.fixture(scope="module")
def slowed(stand_in_cluster):
    with psched.Client(stand_in_cluster) as c:
        return c.run(slowed_job(), progress=False)


def test_a_cpu_job_has_no_gpu_figures_and_a_list_of_stragglers(client):
    r = (pa.arange(0, 10000, chunks=1000) + 1).sum().compute()
    assert r.chunks == 10
    assert isinstance(r.stragglers, list)
    assert len(r.devices) == 2
    for d in r.devices:
        assert d["gpu"] is None
        assert "run" not in d or d["run"]["gpu"] is None
    runs = [d["run"] for d in r.devices if "run" in d]
    assert sum(run["chunks"] for run in runs) == 10
    assert sum(run["bytes"] for run in runs) == 10000 * 8
    assert {run["worker"] for run in runs} <= {d["name"] for d in r.devices}
    assert all(w["gpu"] is None for w in client.workers())


def test_stragglers_come_without_the_device_round_trips(client):
    r = client.run(pa.arange(0, 10000, chunks=1000).sum(), progress=False, devices=False)
    assert r.devices == [] and isinstance(r.stragglers, list)


def test_the_slowed_worker_is_the_straggler_with_its_nvml_cause(slowed):
    assert slowed.chunks == 400 and slowed.sum == (2000 * 2000 - 1) * 2000 * 2000 / 2
    assert [(s["worker"], s["cause"]) for s in slowed.stragglers] == [("local-1", "throttled: hw_thermal_slowdown")]
    assert slowed.stragglers[0]["host"] == next(d["host"] for d in slowed.devices if d["name"] == "local-1")
    for d in slowed.devices:
        assert d["run"]["slow"] == (d["name"] == "local-1")
    assert "straggler local-1: throttled: hw_thermal_slowdown" in slowed.summary()


def test_each_device_carries_the_stand_in_gpus_health(slowed):
    for d in slowed.devices:
        slow = d["name"] == "local-1"
        gpu = d["gpu"]
        assert gpu is not None
        assert gpu["uuid"] == UUID.format(2 if slow else 1)
        assert gpu["pci_bus_id"] == "00000000:3B:00.0"
        assert (gpu["sm_utilisation_pct"], gpu["mem_utilisation_pct"]) == (97.0, 64.0)
        assert (gpu["memory_used_bytes"], gpu["memory_total_bytes"]) == (12 << 30, 80 << 30)
        assert (gpu["sm_clock_mhz"], gpu["sm_clock_max_mhz"]) == (1755.0, 1980)
        assert gpu["temperature_c"] == 61
        assert (gpu["power_watts"], gpu["power_limit_watts"]) == (412.0, 700.0)
        assert gpu["throttle_reasons"] == (0x40 if slow else 0)
        assert (gpu["ecc_supported"], gpu["ecc_corrected"], gpu["ecc_uncorrected"]) == (True, 3, 0)
        assert (gpu["pcie_generation"], gpu["pcie_width"], gpu["pcie_max_width"]) == (5, 16, 16)


def test_each_device_carries_its_gpus_figures_over_the_job(slowed):
    assert sum(d["run"]["chunks"] for d in slowed.devices) == 400
    for d in slowed.devices:
        slow = d["name"] == "local-1"
        run = d["run"]
        assert run["worker"] == d["name"] and run["chunks"] == d["run_chunks"]
        assert run["bytes"] == run["chunks"] * 100 * 100 * 8
        assert run["bytes_per_second"] > 0 and run["busy_share"] > 0
        g = run["gpu"]
        assert g["uuid"] == UUID.format(2 if slow else 1)
        assert g["sm_clock_mhz"] == {"min": 1755.0, "mean": 1755.0, "max": 1755.0}
        assert g["sm_clock_max_mhz"] == 1980
        assert g["temperature_c"]["max"] == 61.0 and g["power_watts"]["mean"] == 412.0
        assert g["sm_utilisation_pct"]["mean"] == 97.0
        assert (g["throttle_reasons"], g["throttle"]) == ((0x40, "hw_thermal_slowdown") if slow else (0, ""))
        assert len(g["series"]) >= 1
        for seconds, clock, temperature, power, utilisation in g["series"]:
            assert seconds >= 0 and (clock, temperature, power, utilisation) == (1755.0, 61.0, 412.0, 97.0)
    assert "SM clock 1755 MHz (max 1980), 61 C, 412 W, util 97%, throttled: hw_thermal_slowdown" in slowed.summary()


def test_each_devices_energy_is_its_gpus_power_over_the_time_it_worked(slowed):
    # The stand-in GPU draws 412 W, and its energy counter advances at exactly that rate. A worker
    # reads the counter at each report and charges what it advanced since the last one (from when
    # the work came, after idle), so a device's energy is 412 W x the time it worked on the job: at
    # least its busy seconds (one thread: its chunks ran one after another) and at most the job's
    # time, submit to result. The job's is the sum (per TB of its 32 MB array).
    runs = [d["run"] for d in slowed.devices]
    assert len(runs) == 2
    for run in runs:
        assert run["busy_seconds"] > 0
        assert 412.0 * run["busy_seconds"] * (1 - 1e-3) <= run["energy_joules"] <= 412.0 * slowed.seconds
    assert slowed.energy_joules == pytest.approx(sum(run["energy_joules"] for run in runs), rel=1e-12)
    assert slowed.joules_per_tb == pytest.approx(slowed.energy_joules / (2000 * 2000 * 8 / 1e12), rel=1e-12)


def test_chunks_run_side_by_side_are_charged_the_time_not_the_sum_of_their_busy_seconds():
    # One worker, two threads, two 20 ms chunks at a time: its busy seconds add up to about twice
    # the time it worked, and the GPU's energy is its power over that time, once (charging each
    # busy second the power, as before 2026-11-28, would count it twice).
    if not os.path.exists(STAND_IN_NVML):
        pytest.skip(f"no stand-in NVML library at {STAND_IN_NVML}")
    with StandInCluster([{"PSCHED_TEST_CHUNK_DELAY_MS": "20"}], threads_per_worker=2) as cluster:
        with psched.Client(cluster) as c:
            r = c.run(pa.arange(0, 1000 * 1000, chunks=1000 * 10).reshape(1000, 1000).rechunk((10, 1000)).sum(),
                      progress=False)
    (run,) = [d["run"] for d in r.devices]
    assert run["busy_seconds"] > 100 * 0.020 * 0.9
    assert 412.0 * run["busy_seconds"] / 2 * (1 - 1e-3) <= run["energy_joules"] <= 412.0 * r.seconds


def test_a_job_without_nvml_has_no_energy(client):
    r = (pa.arange(0, 10000, chunks=1000) + 1).sum().compute()
    assert r.energy_joules is None and r.joules_per_tb is None
    assert all(d["run"]["energy_joules"] == 0 for d in r.devices if "run" in d)


def test_the_keys_are_pbench_jsons(stand_in_cluster, slowed):
    out = pbench_json(stand_in_cluster.scheduler_file, "-x", "2000", "-y", "2000", "--chunk-x", "100",
                      "--chunk-y", "100", "--generator", "arange")
    assert [s["worker"] for s in out["stragglers"]] == [s["worker"] for s in slowed.stragglers]
    assert [set(s) for s in out["stragglers"]] == [set(s) for s in slowed.stragglers] == [{"worker", "host", "cause"}]
    theirs = {d["name"]: d for d in out["devices"]}
    for d in slowed.devices:
        pb = theirs[d["name"]]
        assert set(d) == set(pb)  # a worker's keys and its share of the run: run_chunks, ...
        assert set(d["gpu"]) == set(pb["gpu"])
        assert set(d["run"]) == set(pb["run"])
        assert set(d["run"]["gpu"]) - {"series"} == set(pb["run"]["gpu"])
        assert set(d["run"]["gpu"]["sm_clock_mhz"]) == set(pb["run"]["gpu"]["sm_clock_mhz"])
