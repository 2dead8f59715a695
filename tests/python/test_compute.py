# Every supported expression form against NumPy on small arrays of integers (exact: same count,
# min, max, and sums to the last bit), and the Python client's bits against pbench's for the same
# job on the same cluster.
import math

import numpy as np
import pytest

psched = pytest.importorskip("psched")
pa = pytest.importorskip("psched.array")
from conftest import pbench_json  # noqa: E402

ROWS, COLS = 300, 200


def base():
    return pa.arange(0, ROWS * COLS, chunks=4096).reshape(ROWS, COLS).rechunk((64, 48))


VALUES = np.arange(float(ROWS * COLS)).reshape(ROWS, COLS)

EXPRESSIONS = ["x", "x + 1", "1 + x", "x - 3", "3 - x", "2 * x", "x * 2", "x / 2", "(x - 3) / 2", "-x", "+x",
               "2 * x + 1", "(x + 1) * 2 - 5", "np.float64(2) * x", "x * np.float32(0.5)", "-(x - 7) / 4"]
SELECTIONS = [np.s_[:, :], np.s_[::2, ::2], np.s_[10:290:3, 5::7], np.s_[3:4], np.s_[..., ::3], np.s_[-10:, :-5],
              np.s_[100:101, 199:]]


def check(got, want):
    assert got.count == want.size
    assert got.sum == want.sum()  # integers and halves: exact whatever the order
    assert got.min == want.min() and got.max == want.max()


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_an_expression_gives_numpys_exact_figures(client, expr):
    got = eval(expr, {"x": base(), "np": np})[::2, 1::3].sum().compute(progress=False)
    check(got, eval(expr, {"x": VALUES, "np": np})[::2, 1::3])


@pytest.mark.parametrize("key", SELECTIONS)
def test_a_selection_gives_numpys_exact_figures(client, key):
    check((base() + 1)[key].sum().compute(), (VALUES + 1)[key])


def test_a_slice_of_a_slice_gives_numpys_exact_figures(client):
    check(base()[1::2][::3, 2:50:5][1:, ::2].sum().compute(), VALUES[1::2][::3, 2:50:5][1:, ::2])


def test_each_reduction_is_the_result_as_a_float_with_every_figure(client):
    x = (base() * 2 + 1)[::2, ::2]
    v = (VALUES * 2 + 1)[::2, ::2]
    assert x.sum().compute() == v.sum()
    assert x.mean().compute() == v.sum() / v.size
    assert x.min().compute() == v.min()
    assert x.max().compute() == v.max()
    count = x.count().compute()
    assert count == v.size and int(count) == v.size
    assert count.chunks == 5 * 5 and count.seconds > 0
    assert sum(d["run_chunks"] for d in count.devices) == 25
    assert {d["backend"] for d in count.devices} == {"cpu"}


def test_a_one_dimensional_arange_sums_as_numpy(client):
    got = (pa.arange(3, 100000, 7, chunks=1000)[::3] * 2).sum().compute()
    check(got, (np.arange(3, 100000, 7.0)[::3] * 2))


def test_an_empty_selection_counts_nothing(client):
    got = base()[5:5].sum().compute()
    assert got.count == 0 and got.sum == 0


def test_float32_integers_are_exact(client):
    x = pa.arange(0, 4096, chunks=512, dtype="float32").reshape(64, 64)
    check((x + 1)[::2].sum().compute(), (np.arange(4096.0).reshape(64, 64) + 1)[::2])


def test_constants_sum_exactly(client):
    check((pa.ones((100, 300), chunks=(30, 70)) * 3 - 1)[::3, ::4].sum().compute(),
          (np.ones((100, 300)) * 3 - 1)[::3, ::4])


def test_random_arrays_stay_within_their_bounds(client):
    u = pa.random.uniform(-2, 5, size=(500, 400), chunks=(100, 100), seed=3).sum().compute()
    assert u.count == 200000 and -2 <= u.min and u.max < 5 and abs(u.mean - 1.5) < 0.05
    n = pa.random.RandomState(7).normal(10, 1, size=(500, 400), chunks=(100, 100)).mean().compute()
    assert abs(n - 10) < 0.02


def test_the_sum_is_the_exact_sum_correctly_rounded_whatever_the_chunks(client):
    from fractions import Fraction
    sums = [pa.random.normal(10, 1, size=(500, 400), chunks=c, seed=5).sum().compute(progress=False)
            for c in [(500, 400), (100, 100), (37, 53), (1, 400)]]
    first = sums[0]
    assert first.exact_terms and first.exact_terms[0] == first.sum
    # The terms add up exactly to a value whose rounding is the sum.
    assert float(sum(Fraction(t) for t in first.exact_terms)) == first.sum
    for s in sums[1:]:
        assert s.sum.hex() == first.sum.hex() and s.exact_terms == first.exact_terms


@pytest.mark.parametrize("generator", ["arange", "normal"])
def test_python_and_pbench_give_the_same_bits_for_the_same_job(client, cluster, generator):
    if generator == "arange":
        x = pa.arange(0.5, 0.5 + 1.25 * 3000 * 2000, 1.25, chunks=10**6).reshape(3000, 2000)
        args = ["--generator", "arange", "--start", "0.5", "--step", "1.25"]
    else:
        x = pa.random.normal(10, 1, size=(3000, 2000), seed=11)
        args = ["--generator", "normal", "--mean", "10", "--std", "1", "--seed", "11"]
    got = (x.rechunk((700, 300)) * 2 - 1)[3:2900:3, ::2].sum().compute()
    want = pbench_json(cluster.scheduler_file, "-x", "3000", "-y", "2000", "--chunk-x", "700", "--chunk-y", "300",
                       "--scale", "2", "--offset", "-1", "--row-start", "3", "--row-stop", "2900", "--row-step", "3",
                       "--col-step", "2", *args)
    assert got.count == want["count"] and got.chunks == want["chunks"]
    assert got.sum.hex() == float(want["sum"]).hex()
    assert got.min == want["min"] and got.max == want["max"]
    if generator == "normal":
        assert math.isclose(got.mean, 2 * 10 - 1, rel_tol=1e-2)


def test_a_progress_bar_is_drawn_when_asked_and_never_with_progress_false(client, capsys):
    pytest.importorskip("tqdm")
    x = pa.ones((400, 400), chunks=(50, 50))
    assert x.sum().compute(progress=True) == 160000
    assert "psched" in capsys.readouterr().err  # tqdm.auto: stderr in a terminal, a widget in a notebook
    assert x.sum().compute(progress=False) == 160000
    assert capsys.readouterr().err == ""


def test_compute_returns_a_concurrent_futures_future_of_the_result(client):
    import concurrent.futures
    futures = [client.compute((base() + i)[::2].sum()) for i in range(3)]  # queued on one connection
    assert all(isinstance(f, concurrent.futures.Future) for f in futures)
    done, _ = concurrent.futures.wait(futures, timeout=60)
    assert len(done) == 3
    assert [f.result() for f in futures] == [(VALUES + i)[::2].sum() for i in range(3)]
    assert futures[0].done() and not futures[0].cancelled() and futures[0].cancel() is False


def test_verify_compares_every_chunk_on_the_other_worker_and_finds_no_mismatch(client):
    x = base()[::2, ::2]
    got = x.sum().compute(verify=1.0)
    check(got, VALUES[::2, ::2])
    assert got.verified_chunks == got.chunks == 5 * 5
    assert got.same_worker_chunks == 0  # the fixture's cluster has two workers
    assert got.mismatch_count == 0 and got.mismatches == []
    plain = x.sum().compute()
    assert plain.verified_chunks == 0


def test_verify_out_of_range_is_refused_with_one_line(client):
    with pytest.raises(Exception, match=r"verify fraction must be in \[0, 1\] \(got 1.5\)"):
        base().sum().compute(verify=1.5)
