# psched.array's arrays in files (docs/design.md, "Stored arrays"): from_npy, from_npy_stack,
# from_zarr, from_raw and from_array on a real local cluster (psched + 2 CPU workers), files written
# by numpy and python3-zarr as a user would. Every sum is checked exactly: its exact terms add up to
# the exact sum of the selected elements (Fraction) and the sum is math.fsum's, correctly rounded.
# Bad files raise at the line that opens them with libpclient's one line.
import math
import os
import subprocess

import numpy as np
import pytest

psched = pytest.importorskip("psched")
pa = pytest.importorskip("psched.array")
zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")
from conftest import BIN_DIR, elements, exact, random_array  # noqa: E402

rng = np.random.default_rng(20261127)


def check(x, want):
    """x's sum, count, min, max and mean are exactly those of the numpy array `want`."""
    values = elements(want)
    got = x.sum().compute(progress=False)
    assert got.count == len(values)
    assert exact(got.exact_terms) == exact(values)
    assert float(got) == float(exact(values))  # correctly rounded: math.fsum's for floats
    if want.dtype.kind == "f":
        assert float(got) == math.fsum(values)
    assert (got.min, got.max) == (float(min(values)), float(max(values)))
    assert x.mean().compute(progress=False) == float(got) / len(values)
    return got


def test_npy_with_a_selection_and_an_expression(client, tmp_path):
    a = rng.normal(11, 3, size=(50, 40))
    np.save(tmp_path / "a.npy", a)
    x = pa.from_npy(tmp_path / "a.npy", chunks=(9, 11))
    assert (x.shape, x.dtype, x.chunksize, x.numblocks) == ((50, 40), np.float64, (9, 11), (6, 4))
    check(x, a)
    check((x[::2, 3::3] * 2.5 + 1), a[::2, 3::3] * 2.5 + 1)  # multiply, then add: each rounded, as numpy
    check(-x[-7:, :5] / 4, -a[-7:, :5] / 4)
    assert x[::2, 3::3].count().compute() == a[::2, 3::3].size


@pytest.mark.parametrize("dtype", ["<f4", ">f4", "<i8", ">u8", "|b1", "<i2", "<u1"])
def test_the_files_dtype_is_the_arrays_and_its_sum_is_exact(client, tmp_path, dtype):
    a = random_array(rng, dtype, (37, 29))
    np.save(tmp_path / "a.npy", a)
    x = pa.from_npy(tmp_path / "a.npy", chunks=(8, 7))
    assert x.dtype == np.dtype(dtype).newbyteorder("=") and x.itemsize == a.itemsize and x.nbytes == a.nbytes
    check(x, a)
    check(x[1::3, ::2], a[1::3, ::2])


def test_64_bit_integers_past_2_53_sum_exactly(client, tmp_path):
    a = np.array([[2**62 + 1, -(2**62) - 3, 2**53 + 1], [2**63 - 1, 5, -(2**63)], [2**53 + 3, 2**53 + 5, 1]], "<i8")
    np.save(tmp_path / "i.npy", a)
    got = check(pa.from_npy(tmp_path / "i.npy", chunks=(1, 2)), a)
    assert exact(got.exact_terms) == int(a.astype(object).sum())
    # Past 2^53 float64 loses the odd ones: their exact sum is not float64's.
    assert exact(got.exact_terms) != exact(a.astype(np.float64).reshape(-1))
    v = np.array([2**64 - 1, 2**64 - 2, 2**53 + 1, 7], dtype="<u8")
    np.save(tmp_path / "u.npy", v)
    x = pa.from_npy(tmp_path / "u.npy", chunks=3)
    assert (x.ndim, x.shape, x.chunks) == (1, (4,), ((3, 1),))
    check(x, v)


def test_npy_stack_along_axis_0(client, tmp_path):
    parts = [rng.normal(size=(n, 13)).astype("<f4") for n in (5, 1, 9)]
    (tmp_path / "stack").mkdir()
    for i, p in enumerate(parts):
        np.save(tmp_path / "stack" / f"{i}.npy", p)
    a = np.concatenate(parts)
    x = pa.from_npy_stack(tmp_path / "stack", chunks=(4, 5))
    assert (x.shape, x.dtype) == ((15, 13), np.float32)
    check(x, a)
    check(x[2:14:3, 1:] * 3 - 2, a[2:14:3, 1:].astype(np.float64) * 3 - 2)  # float32 widened, then the expression


@pytest.mark.parametrize("codec", ["blosc-lz4", "blosc-zstd-bitshuffle", "zstd"])
def test_zarr_stores_with_blosc_and_zstd(client, tmp_path, codec):
    compressor = {"blosc-lz4": numcodecs.Blosc(cname="lz4"),
                  "blosc-zstd-bitshuffle": numcodecs.Blosc(cname="zstd", shuffle=numcodecs.Blosc.BITSHUFFLE),
                  "zstd": numcodecs.Zstd(level=3)}[codec]
    z = zarr.open(str(tmp_path / "a.zarr"), mode="w", shape=(45, 33), chunks=(10, 8), dtype="<f8",
                  compressor=compressor, fill_value=0.25)
    a = rng.normal(5, 2, size=(45, 33))
    a[40:, :] = 0.25  # never written: the chunk files are missing, their elements the fill value
    z[:40, :] = a[:40, :]
    x = pa.from_zarr(str(tmp_path / "a.zarr"))
    assert (x.shape, x.chunksize, x.numblocks) == ((45, 33), (10, 8), (5, 5))  # the store's own chunks
    check(x, a)
    check((x + 1)[::2, 5:30:4] * 0.5, (a + 1)[::2, 5:30:4] * 0.5)
    check(pa.from_zarr(z, chunks=(20, 16)), a)  # whole multiples, and a zarr.Array as dask takes it


def test_zarr_chunks_that_are_not_whole_multiples_of_the_stores_are_refused(client, tmp_path):
    z = zarr.open(str(tmp_path / "a.zarr"), mode="w", shape=(40, 40), chunks=(10, 10), dtype="<i4")
    z[:] = 1
    with pytest.raises(ValueError, match="whole multiples of the zarr store's chunks 10 x 10"):
        pa.from_zarr(tmp_path / "a.zarr", chunks=(15, 10))
    with pytest.raises(ValueError, match="whole multiples"):
        pa.from_zarr(tmp_path / "a.zarr").rechunk((10, 25))
    with pytest.raises(ValueError, match="directory stores"):
        pa.from_zarr(zarr.zeros((4, 4)))  # in this process's memory: no worker can read it


def test_a_one_dimensional_integer_zarr_store_in_a_group(client, tmp_path):
    group = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    v = rng.integers(-(2**62), 2**62, size=1000)
    group.create_dataset("v", data=v, chunks=(64,), dtype="<i8", compressor=numcodecs.Zstd())
    x = pa.from_zarr(tmp_path / "g.zarr", component="v")
    assert (x.shape, x.dtype, x.chunks[0][:2]) == ((1000,), np.int64, (64, 64))
    check(x, v)
    check(x[100:900:7], v[100:900:7])


def test_raw_with_offset_and_byte_order(client, tmp_path):
    a = rng.integers(-1000, 1000, size=(17, 31)).astype(">i4")
    (tmp_path / "a.raw").write_bytes(b"HEADER!" + a.tobytes())
    x = pa.from_raw(tmp_path / "a.raw", (17, 31), "int32", offset=7, byte_order="big", chunks=(5, 31))
    assert (x.shape, x.dtype) == ((17, 31), np.int32)
    check(x, a)
    check(pa.from_raw(tmp_path / "a.raw", (17, 31), ">i4", offset=7)[3:, ::5] * 2 + 1, a[3:, ::5] * 2 + 1)
    with pytest.raises(ValueError, match="big-endian but byte_order is 'little'"):
        pa.from_raw(tmp_path / "a.raw", (17, 31), ">i4", offset=7, byte_order="little")


def test_a_file_job_gives_the_generator_jobs_bits(client, tmp_path):
    """pbench --write-npy writes the generator's own elements: the same exact sum, to the bit."""
    for dtype in ["float64", "float32"]:
        subprocess.run([os.path.join(BIN_DIR, "pbench"), "--generator", "normal", "--seed", "7", "-x", "300", "-y",
                        "200", "--dtype", dtype, "--write-npy", str(tmp_path / f"{dtype}.npy")],
                       check=True, capture_output=True, timeout=60)
        generated = pa.random.normal(10, 1, size=(300, 200), chunks=(64, 50), seed=7, dtype=dtype)
        stored = pa.from_npy(tmp_path / f"{dtype}.npy", chunks=(64, 50))
        for view in [np.s_[:, :], np.s_[::2, 3::5]]:
            want = (generated[view] * 3 + 1).sum().compute()
            got = (stored[view] * 3 + 1).sum().compute()
            assert (got.exact_terms, got.sum, got.min, got.max) == (want.exact_terms, want.sum, want.min, want.max)
        check(stored, np.load(tmp_path / f"{dtype}.npy"))


def test_from_array_writes_once_into_the_local_clusters_directory(client, cluster, tmp_path):
    a = rng.normal(size=(120, 70)).astype(np.float32)
    before = set(os.listdir(cluster.local_directory))
    x = pa.from_array(a, chunks=(32, 32))
    written = set(os.listdir(cluster.local_directory)) - before
    assert len(written) == 1 and written.pop().endswith(".npy")
    assert (x.shape, x.dtype, x.chunksize) == ((120, 70), np.float32, (32, 32))
    check(x, a)
    check(x[::3, 10:] * 2 - 1, a[::3, 10:].astype(np.float64) * 2 - 1)
    b = np.arange(10) % 3 == 0
    check(pa.from_array(b, directory=tmp_path), b)  # anywhere the workers read
    assert len(list(tmp_path.glob("psched-array-*.npy"))) == 1 and not list(tmp_path.glob(".psched-array-*"))


def test_from_array_refuses_what_it_should_not_write(client, cluster, tmp_path):
    with pytest.raises(ValueError, match="max_bytes=1000"):
        pa.from_array(np.zeros(126), max_bytes=1000)
    assert pa.from_array(np.zeros(126), max_bytes=None).size == 126
    with pytest.raises(TypeError, match="complex128"):
        pa.from_array(np.zeros(4, dtype=complex))
    # A client of a cluster that is not a LocalCluster has no directory of its own.
    with psched.Client(scheduler_file=cluster.scheduler_file, set_as_default=False) as other:
        with pytest.raises(ValueError, match="pass directory=, a directory every worker can read"):
            pa.from_array(np.ones(5), client=other)


def test_bad_files_raise_with_libpclients_line(client, tmp_path):
    with pytest.raises(FileNotFoundError, match="none.npy: No such file"):
        pa.from_npy(tmp_path / "none.npy")
    np.save(tmp_path / "a.npy", rng.normal(size=(20, 20)))
    (tmp_path / "short.npy").write_bytes((tmp_path / "a.npy").read_bytes()[:-8])
    with pytest.raises(ValueError, match="short.npy: truncated"):
        pa.from_npy(tmp_path / "short.npy")
    np.save(tmp_path / "c.npy", np.zeros((3, 3), dtype=np.complex128))
    with pytest.raises(ValueError, match="complex"):
        pa.from_npy(tmp_path / "c.npy")
    with pytest.raises(ValueError, match="truncated"):
        pa.from_raw(tmp_path / "a.npy", (30, 30), "float64")
    with pytest.raises(FileNotFoundError):
        pa.from_zarr(tmp_path / "none.zarr")
    # A file that goes away after the array is made fails its job, naming it.
    x = pa.from_npy(tmp_path / "a.npy")
    os.remove(tmp_path / "a.npy")
    with pytest.raises(psched.Error, match="a.npy"):
        x.sum().compute()
