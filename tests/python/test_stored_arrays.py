# Arrays in files (docs/design.md, "Stored arrays"): .npy files, .npy stacks, raw files and Zarr
# stores written by numpy and python3-zarr as a user would, summed by pbench --input on a real local
# cluster (psched + 2 CPU workers), and checked exactly: the job's exact terms add up to the exact
# sum of the selected elements (Python's Fraction), and its sum is math.fsum's, the correctly
# rounded one. Bad files give one clear line and a non-zero exit.
import json
import math
import os
import signal
import subprocess

import numpy as np
import pytest

from conftest import BIN_DIR, elements, exact, pbench_json, random_array

zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")


def check(out, values):
    """pbench's result is the exact sum of `values`, correctly rounded."""
    values = list(values)
    assert out["count"] == len(values)
    assert exact(out["exact_terms"]) == exact(values)
    if values and all(isinstance(v, float) for v in values):
        assert out["sum"] == math.fsum(values)
    else:
        assert out["sum"] == float(exact(values))


def run(cluster, path, *args):
    return pbench_json(cluster.scheduler_file, "--input", str(path), *args)


def pbench_fails(cluster, *args):
    p = subprocess.run([os.path.join(BIN_DIR, "pbench"), "-d", "--scheduler-file", cluster.scheduler_file, "-q",
                        *args], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, p.stderr
    return lines[0]


rng = np.random.default_rng(20261127)


@pytest.mark.parametrize("dtype", ["<f8", "<f4", ">f8", "<i1", "<i2", "<i4", "<u1", "<u2", "<u4", "|b1"])
def test_npy_of_every_dtype_is_summed_exactly(cluster, tmp_path, dtype):
    a = random_array(rng, dtype, (37, 29))
    np.save(tmp_path / "a.npy", a)
    out = run(cluster, tmp_path / "a.npy", "--chunk-x", "8", "--chunk-y", "7")
    check(out, elements(a))
    assert (out["rows"], out["cols"], out["chunks"]) == (37, 29, 5 * 5)


def test_64_bit_integers_past_2_53_stay_exact(cluster, tmp_path):
    a = np.array([[2**62 + 1, -(2**62) - 3, 2**53 + 1], [2**63 - 1, 5, -(2**63)]], dtype="<i8")
    np.save(tmp_path / "i.npy", a)
    check(run(cluster, tmp_path / "i.npy", "--chunk-x", "1", "--chunk-y", "2"), elements(a))
    u = np.array([2**64 - 1, 2**64 - 2, 2**53 + 1, 7], dtype=">u8")
    np.save(tmp_path / "u.npy", u)
    check(run(cluster, tmp_path / "u.npy", "--chunk-y", "3"), elements(u))


def test_fortran_order_and_header_versions(cluster, tmp_path):
    a = np.asfortranarray(rng.normal(size=(41, 23)))
    for version in [(1, 0), (2, 0), (3, 0)]:
        path = tmp_path / f"f{version[0]}.npy"
        with open(path, "wb") as f:
            np.lib.format.write_array(f, a, version=version)
        check(run(cluster, path, "--chunk-x", "10", "--chunk-y", "6"), elements(a))


def test_selection_and_expression_apply_as_to_a_generated_array(cluster, tmp_path):
    a = rng.normal(11, 1, size=(50, 40))
    np.save(tmp_path / "a.npy", a)
    out = run(cluster, tmp_path / "a.npy", "--chunk-x", "9", "--chunk-y", "11", "--row-step", "2", "--col-start", "3",
              "--col-step", "3", "--scale", "2.5", "--offset", "1")
    sel = a[::2, 3::3]
    check(out, [float(v) for v in (sel * 2.5 + 1).reshape(-1)])  # multiply, then add: each rounded


def test_npy_stack_along_axis_0(cluster, tmp_path):
    parts = [rng.normal(size=(n, 13)).astype("<f4") for n in (5, 1, 9)]
    stack = tmp_path / "stack"
    stack.mkdir()
    for i, p in enumerate(parts):
        np.save(stack / f"{i}.npy", p)
    (stack / "info").write_bytes(b"written by da.to_npy_stack: pbench reads the files")
    out = run(cluster, stack, "--chunk-x", "4", "--chunk-y", "5")
    check(out, elements(np.concatenate(parts)))
    assert out["rows"] == 15


def test_raw_with_offset_and_byte_order(cluster, tmp_path):
    a = rng.integers(-1000, 1000, size=(17, 31)).astype(">i4")
    (tmp_path / "a.raw").write_bytes(b"HEADER!" + a.tobytes())
    out = run(cluster, tmp_path / "a.raw", "--dtype", "int32", "--shape", "17,31", "--data-offset", "7",
              "--byte-order", "big", "--chunk-x", "5")
    check(out, elements(a))


@pytest.mark.parametrize("compressor", [None, "zstd", "lz4", "blosc-zstd", "zlib"])
def test_zarr_with_every_compressor(cluster, tmp_path, compressor):
    codec = {None: None, "zstd": numcodecs.Zstd(level=3), "lz4": numcodecs.Blosc(cname="lz4"),
             "blosc-zstd": numcodecs.Blosc(cname="zstd", shuffle=numcodecs.Blosc.BITSHUFFLE),
             "zlib": numcodecs.Blosc(cname="zlib")}[compressor]
    z = zarr.open(str(tmp_path / "a.zarr"), mode="w", shape=(45, 33), chunks=(10, 8), dtype="<f8", compressor=codec,
                  fill_value=0.25)
    a = rng.normal(5, 2, size=(45, 33))
    a[40:, :] = 0.25  # rows 40.. never written: their chunk files are missing, their elements the fill value
    z[:40, :] = a[:40, :]
    out = run(cluster, tmp_path / "a.zarr")
    check(out, elements(a))
    assert (out["chunk_rows"], out["chunk_cols"]) == (10, 8)  # the store's own chunks
    # Whole multiples of the store's chunks read each stored chunk once; anything else is refused.
    check(run(cluster, tmp_path / "a.zarr", "--chunk-x", "20", "--chunk-y", "16"), elements(a))
    assert "whole multiples" in pbench_fails(cluster, "--input", str(tmp_path / "a.zarr"), "--chunk-x", "15")


def test_zarr_1d_integers_and_nested_keys(cluster, tmp_path):
    z = zarr.open(str(tmp_path / "v.zarr"), mode="w", shape=(1000,), chunks=(64,), dtype=">u2",
                  compressor=numcodecs.Blosc(cname="lz4"))
    v = rng.integers(0, 65535, size=1000).astype(">u2")
    z[:] = v
    check(run(cluster, tmp_path / "v.zarr"), elements(v))
    store = zarr.DirectoryStore(str(tmp_path / "n.zarr"), dimension_separator="/")
    n = zarr.open(store, mode="w", shape=(30, 30), chunks=(7, 7), dtype="<i8", compressor=numcodecs.Zstd())
    m = rng.integers(-(2**62), 2**62, size=(30, 30))
    n[:] = m
    check(run(cluster, tmp_path / "n.zarr"), elements(m))


def test_written_files_give_the_generator_jobs_bits(cluster, tmp_path):
    job = ["--generator", "normal", "--seed", "7", "-x", "300", "-y", "200", "--chunk-x", "64", "--chunk-y", "50"]
    want = pbench_json(cluster.scheduler_file, *job, "--row-step", "1", "--col-step", "1", "--offset", "0")
    for dtype in ["float64", "float32"]:
        subprocess.run([os.path.join(BIN_DIR, "pbench"), *job, "--dtype", dtype, "--write-npy", str(tmp_path / "g.npy")],
                       check=True, capture_output=True, timeout=60)
        subprocess.run([os.path.join(BIN_DIR, "pbench"), *job, "--dtype", dtype, "--write-zarr",
                        str(tmp_path / f"g{dtype}.zarr"), "--compressor", "blosc-lz4"],
                       check=True, capture_output=True, timeout=60)
        if dtype == "float32":
            want = pbench_json(cluster.scheduler_file, *job, "--dtype", "float32", "--row-step", "1", "--col-step", "1",
                               "--offset", "0")
        for path in [tmp_path / "g.npy", tmp_path / f"g{dtype}.zarr"]:
            got = run(cluster, path, "--chunk-x", "64", "--chunk-y", "50")
            assert got["exact_terms"] == want["exact_terms"] and got["sum"] == want["sum"], path
        # numpy reads what pbench wrote, and finds the same exact sum.
        check(want, elements(np.load(tmp_path / "g.npy")))


def test_bad_files_say_what_is_wrong(cluster, tmp_path):
    a = rng.normal(size=(20, 20))
    np.save(tmp_path / "a.npy", a)
    data = (tmp_path / "a.npy").read_bytes()
    (tmp_path / "short.npy").write_bytes(data[:-8])
    assert "truncated" in pbench_fails(cluster, "--input", str(tmp_path / "short.npy"))
    assert "No such file" in pbench_fails(cluster, "--input", str(tmp_path / "none.npy"))
    np.save(tmp_path / "c.npy", np.zeros((3, 3), dtype=np.complex128))
    assert "complex" in pbench_fails(cluster, "--input", str(tmp_path / "c.npy"))
    (tmp_path / "x.raw").write_bytes(b"\0" * 64)
    assert "dtype" in pbench_fails(cluster, "--input", str(tmp_path / "x.raw"), "--format", "raw", "--shape", "8")
    assert "truncated" in pbench_fails(cluster, "--input", str(tmp_path / "x.raw"), "--dtype", "float64", "--shape",
                                       "9")
    bad = tmp_path / "bad.zarr"
    bad.mkdir()
    (bad / ".zarray").write_text('{"zarr_format": 2, "shape": [4, 4], "chunks": [2, 2], "dtype": "<f8"')
    assert "not valid JSON" in pbench_fails(cluster, "--input", str(bad))
    # FIFOs, which open() waits on for a writer: refused, not waited on.
    os.mkfifo(tmp_path / "fifo.npy")
    assert "fifo.npy: not a regular file" in pbench_fails(cluster, "--input", str(tmp_path / "fifo.npy"))
    assert "fifo.npy: not a regular file" in pbench_fails(cluster, "--input", str(tmp_path / "fifo.npy"), "--format",
                                                          "raw", "--dtype", "float64", "--shape", "4")
    (tmp_path / "fifo.zarr").mkdir()
    os.mkfifo(tmp_path / "fifo.zarr" / ".zarray")
    assert ".zarray: not a regular file" in pbench_fails(cluster, "--input", str(tmp_path / "fifo.zarr"))
    # Values of the wrong kind (pbench aborted on an uncaught json type_error before 2026-12-01).
    (bad / ".zarray").write_text('{"zarr_format": "2", "shape": [4, 4], "chunks": [2, 2], "dtype": "<f8"}')
    assert "zarr_format must be 2" in pbench_fails(cluster, "--input", str(bad))
    (bad / ".zarray").write_text('{"zarr_format": 2, "shape": [4, 4], "chunks": [2, 2], "dtype": "<f8", '
                                 '"compressor": {"id": "blosc", "cname": 4}}')
    assert "cname is 4, not a string" in pbench_fails(cluster, "--input", str(bad))


def test_unreadable_chunks_fail_the_job_naming_the_file(cluster, tmp_path):
    z = zarr.open(str(tmp_path / "c.zarr"), mode="w", shape=(20, 20), chunks=(10, 10), dtype="<f8",
                  compressor=numcodecs.Zstd(), fill_value=None)
    z[:] = rng.normal(size=(20, 20))
    (tmp_path / "c.zarr" / "1.0").write_bytes(b"not zstd at all")
    line = pbench_fails(cluster, "--input", str(tmp_path / "c.zarr"))
    assert "1.0" in line and "corrupt zstd" in line and "chunk 2" in line
    os.remove(tmp_path / "c.zarr" / "1.0")
    line = pbench_fails(cluster, "--input", str(tmp_path / "c.zarr"))
    assert "1.0" in line and "missing" in line and "fill_value" in line
    # A FIFO where a chunk file should be: refused at once (open() blocked the worker's reader
    # forever before 2026-12-01, and the job with it).
    os.mkfifo(tmp_path / "c.zarr" / "1.0")
    line = pbench_fails(cluster, "--input", str(tmp_path / "c.zarr"))
    assert "1.0: not a regular file" in line and "chunk 2" in line
    # A chunk file far larger than any compression of its 800 bytes (sparse, 4 GB): refused
    # before it is read into the worker's memory.
    os.remove(tmp_path / "c.zarr" / "1.0")
    with open(tmp_path / "c.zarr" / "1.0", "wb") as f:
        f.truncate(4 << 30)
    line = pbench_fails(cluster, "--input", str(tmp_path / "c.zarr"))
    assert "1.0: holds 4294967296 bytes, more than a 800-byte chunk compressed can" in line


@pytest.mark.parametrize("reads", ["whole", "bands", "mapped bands"])
@pytest.mark.parametrize("workers", [1, 3, 7])
def test_a_written_file_gives_the_generator_bits_on_any_worker_count_and_after_a_kill(tmp_path, monkeypatch, workers,
                                                                                       reads):
    """A file written by --write-npy, summed on 1, 3 and 7 CPU workers (one of them killed -9 mid-job
    when there are several), gives the generator job's exact terms; with bands, each worker's two
    threads share every chunk a band of two rows at a time (PSCHED_TEST_BAND_BYTES: 4 KiB of a
    chunk's 20 KB), as they share a big file's chunks; mapped, every band is reduced where it lies
    in the file's mapping (PSCHED_TEST_READ_WAY=map), as a reader that finds mapping cheaper does."""
    psched = pytest.importorskip("psched")
    from conftest import api_status
    job = ["--generator", "uniform", "--seed", "11", "-x", "600", "-y", "500", "--chunk-x", "10", "--chunk-y", "250"]
    plain = ["--row-step", "1", "--col-step", "1", "--offset", "0"]
    subprocess.run([os.path.join(BIN_DIR, "pbench"), *job, "--write-npy", str(tmp_path / "u.npy")], check=True,
                   capture_output=True, timeout=60)
    # Each chunk (each band) takes 10 ms on a worker, so the 120-chunk job is still running when the kill lands.
    monkeypatch.setenv("PSCHED_TEST_CHUNK_DELAY_MS", "10")
    bands = reads != "whole"
    if bands:
        monkeypatch.setenv("PSCHED_TEST_BAND_BYTES", "4096")
    if reads == "mapped bands":
        monkeypatch.setenv("PSCHED_TEST_READ_WAY", "map")
    with psched.LocalCluster(cpus=workers, threads_per_worker=2 if bands else 1) as c:
        want = pbench_json(c.scheduler_file, *job, *plain)
        run = subprocess.Popen([os.path.join(BIN_DIR, "pbench"), "-d", "--scheduler-file", c.scheduler_file, "-q",
                                "--json", "--input", str(tmp_path / "u.npy"), "--chunk-x", "10", "--chunk-y", "250"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if workers > 1:
            # Readiness: the job has finished some chunks, and not all, before one worker is killed.
            while True:
                jobs = api_status(c.dashboard_link)["jobs"]
                if jobs and jobs[0]["chunks_done"] > 0:
                    break
                assert run.poll() is None, run.stderr.read()
            os.kill(c.pids[1], signal.SIGKILL)
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        got = json.loads(out)
        assert got["exact_terms"] == want["exact_terms"] and got["sum"] == want["sum"]
        assert got["count"] == 600 * 500 and got["chunks"] == 120
