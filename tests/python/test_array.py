# psched.array without a cluster: shapes, chunks, nbytes and dtype as dask.array has them, and every
# unsupported form raising where it is written (construction), never at compute time.
import numpy as np
import pytest

pa = pytest.importorskip("psched.array")


def small():
    return pa.arange(0, 120 * 50, chunks=1000).reshape(120, 50).rechunk((32, 20))


def test_the_seed_array_has_the_shape_chunks_and_nbytes_dask_gives_it():
    x = pa.random.normal(10, 1, size=(500000, 500000), chunks=(10000, 10000), seed=0)
    assert x.shape == (500000, 500000)
    assert x.chunks == ((10000,) * 50, (10000,) * 50)
    assert x.nbytes == 2 * 10**12
    assert x.dtype == np.float64
    y = (x + 1)[::2, ::2]
    assert y.shape == (250000, 250000)
    assert y.chunks == ((5000,) * 50, (5000,) * 50)
    assert y.nbytes == 250000 * 250000 * 8


@pytest.mark.parametrize("key", [np.s_[::2, ::2], np.s_[10:90:3, 5::7], np.s_[3:4], np.s_[..., ::3],
                                 np.s_[-10:, :-5], np.s_[5:5], np.s_[100:1000], np.s_[7::200, 49:]])
def test_a_selection_has_numpys_shape_and_the_blocks_of_its_elements(key):
    x, v = small(), np.arange(6000.0).reshape(120, 50)
    assert x[key].shape == v[key].shape
    for axis, blocks in enumerate(x[key].chunks):
        assert sum(blocks) == v[key].shape[axis]


def test_a_slice_of_a_slice_is_one_strided_selection():
    x, v = small(), np.arange(6000.0).reshape(120, 50)
    assert x[1::2][::3, 2:50:5][1:, ::2].shape == v[1::2][::3, 2:50:5][1:, ::2].shape


def test_float32_arrays_have_half_the_bytes():
    x = pa.ones((100, 100), chunks=10, dtype="float32")
    assert x.dtype == np.float32 and x.nbytes == 40000 and x.itemsize == 4


def test_a_one_dimensional_arange_has_numpys_length():
    assert pa.arange(3, 1000, 7, chunks=64).shape == np.arange(3, 1000, 7).shape
    assert pa.arange(10, chunks=3).chunks == ((3, 3, 3, 1),)


@pytest.mark.parametrize("form", [
    "2 / x", "x ** 2", "x // 2", "x % 2", "abs(x)", "x > 1", "x[::-1]", "x[5]", "x[[1, 2]]",
    "x[None]", "x.sum(axis=0)", "x.mean(axis=1)", "x.sum(keepdims=True)", "np.sin(x)", "np.exp(x)",
    "x.astype('float32')", "x.compute()", "x.T", "float(x)", "x.reshape(60, 100)", "x[::2].rechunk(4)",
    "np.cumsum(x)", "x.sum() + 1", "list(x)",
])
def test_an_operation_the_scheduler_cannot_run_raises_not_implemented_naming_what_is_supported(form):
    x = small()
    with pytest.raises(NotImplementedError, match="psched arrays support"):
        eval(form)


@pytest.mark.parametrize("form", ["x * x", "x + x", "x + np.ones(3)", "x * 'a'", "x - x.sum()", "x + None"])
def test_an_operand_that_is_not_a_scalar_raises_type_error(form):
    x = small()
    with pytest.raises(TypeError, match="x \\* a \\+ b"):
        eval(form)


def test_other_dtypes_and_non_finite_scalars_are_refused():
    with pytest.raises(TypeError, match="float64 or float32"):
        pa.ones((4, 4), chunks=2, dtype="int32")
    with pytest.raises(TypeError, match="float64 or float32"):
        pa.arange(10, dtype=int)
    with pytest.raises(ValueError, match="finite"):
        small() * float("inf")
    with pytest.raises(ZeroDivisionError):
        small() / 0


def test_numpy_scalars_work_on_either_side():
    x = small()
    assert (np.float64(2) * x)._scale == 2.0
    assert (x + np.float32(0.5))._offset == 0.5
    assert (np.int64(3) - x)._scale == -1.0
