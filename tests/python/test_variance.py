# x.var(ddof) and x.std(ddof) against an exact oracle (issue 45): fractions.Fraction for the variance
# of the same numbers, rounded once by float() (which rounds a Fraction correctly), and an integer
# square root with enough bits for std; on arange, constant and adversarial data (a huge mean and a
# tiny spread, mixed magnitudes, values whose squares overflow), in several chunkings.
import math
from fractions import Fraction

import numpy as np
import pytest

from conftest import elements, pbench_json

pa = pytest.importorskip("psched.array")


def exact_var(values, ddof):
    xs = [Fraction(v) for v in values]
    n = len(xs)
    mean = sum(xs, Fraction(0)) / n
    return sum(((x - mean) ** 2 for x in xs), Fraction(0)) / (n - ddof)


def rounded_sqrt(q):
    """sqrt of a Fraction >= 0, correctly rounded: the integer root of q 2^(2k) with 80 bits or
    more, one more bit set when inexact (never on a rounding boundary), then rounded by float()."""
    if q == 0:
        return 0.0
    k = max(0, 80 - (q.numerator.bit_length() - q.denominator.bit_length()) // 2)
    scaled = q.numerator * 4 ** k
    whole, rest = divmod(scaled, q.denominator)
    root = math.isqrt(whole)
    inexact = rest != 0 or root * root != whole
    return float(Fraction(2 * root + inexact, 2 ** (k + 1)))


@pytest.mark.parametrize("chunks", [(40, 300), (7, 11), (1, 300), (40, 1)])
@pytest.mark.parametrize("ddof", [0, 1])
def test_var_and_std_of_arange_with_a_huge_mean_are_the_exact_values_rounded_once(client, chunks, ddof):
    x = (pa.arange(0, 40 * 300, chunks=12000).reshape(40, 300).rechunk(chunks) * 3.0 + 2.0 ** 45)[::3, 1::2]
    values = elements((np.arange(40 * 300.0).reshape(40, 300) * 3.0 + 2.0 ** 45)[::3, 1::2])
    q = exact_var(values, ddof)
    assert float(x.var(ddof=ddof).compute(client=client, progress=False)) == float(q)
    assert float(x.std(ddof=ddof).compute(client=client, progress=False)) == rounded_sqrt(q)


def adversarial(rng):
    return {
        "huge mean, tiny spread": 1e15 + rng.integers(0, 3, size=(30, 40)) * 0.125,
        "mixed magnitudes": rng.normal(0, 1, size=(30, 40)) * 10.0 ** rng.integers(-150, 150, size=(30, 40)),
        "normal(11, 1)": rng.normal(11, 1, size=(30, 40)),
        "constant": np.full((30, 40), 0.1),
    }


@pytest.mark.parametrize("name", ["huge mean, tiny spread", "mixed magnitudes", "normal(11, 1)", "constant"])
def test_var_and_std_of_stored_data_match_fractions_in_every_chunking(client, tmp_path, name):
    a = adversarial(np.random.default_rng(45))[name]
    np.save(tmp_path / "a.npy", a)
    values = elements(a)
    for ddof in (0, 1):
        q = exact_var(values, ddof)
        for chunks in ((30, 40), (7, 9), (1, 40)):
            x = pa.from_npy(str(tmp_path / "a.npy"), chunks=chunks)
            assert float(x.var(ddof=ddof).compute(client=client, progress=False)) == float(q), (chunks, ddof)
            assert float(x.std(ddof=ddof).compute(client=client, progress=False)) == rounded_sqrt(q), (chunks, ddof)


def test_nan_and_overflowing_squares_give_nan_and_inf(client, tmp_path):
    a = np.ones((4, 5))
    a[2, 3] = np.nan
    np.save(tmp_path / "nan.npy", a)
    assert math.isnan(pa.from_npy(str(tmp_path / "nan.npy")).var().compute(client=client, progress=False))
    b = np.ones((4, 5))
    b[1, 1] = 1e300  # its square overflows: inf (numpy, squaring x - mean, gives inf here too)
    np.save(tmp_path / "big.npy", b)
    assert pa.from_npy(str(tmp_path / "big.npy")).std().compute(client=client, progress=False) == math.inf
    one = pa.from_npy(str(tmp_path / "nan.npy"))[0:1, 0:1]
    assert math.isnan(one.var(ddof=1).compute(client=client, progress=False))


def test_a_var_result_carries_every_figure_and_its_ddof(client):
    r = pa.arange(0, 1000, chunks=100).var(ddof=1).compute(client=client, progress=False)
    assert r.kind == "var" and r.ddof == 1
    assert r.var == float(r) == float(Fraction(1000 * 1001, 12))
    assert r.std == rounded_sqrt(Fraction(1000 * 1001, 12))
    assert r.sum == 499500 and r.count == 1000
    with pytest.raises(ValueError):
        pa.arange(0, 10).var(ddof=-1)


def test_var_std_and_ddof_are_pbench_jsons(cluster, client):
    r = pa.arange(0, 1000, chunks=100).std(ddof=1).compute(client=client, progress=False)
    out = pbench_json(cluster.scheduler_file, "-x", "1", "-y", "1000", "--chunk-x", "1", "--chunk-y", "100",
                      "--generator", "arange", "--row-step", "1", "--col-step", "1", "--offset", "0",
                      "--stats", "var,std", "--ddof", "1")
    assert (r.var, r.std, r.ddof, r.sum, r.count) == (out["var"], out["std"], out["ddof"], out["sum"], out["count"])
    assert float(r) == out["std"]
