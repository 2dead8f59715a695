"""The creation functions of psched.array (dask.array's names): random.normal, random.uniform,
random.RandomState / default_rng, arange, full, ones, zeros. Each makes an Array whose generator
the workers evaluate per element from its global position, so values do not depend on chunks."""

import math
import numbers
import os
import types

from ._core import Array, _np, _scalar


def _shape(size):
    if size is None:
        raise TypeError("size is required (a psched array is never a scalar)")
    return (size,) if isinstance(size, numbers.Integral) else tuple(size)


def _fresh_seed():
    return int.from_bytes(os.urandom(8), "little") >> 1


class RandomState:
    """da.random.RandomState / default_rng: normal and uniform with one seed."""

    def __init__(self, seed=None):
        self._seed = _fresh_seed() if seed is None else int(seed)

    def normal(self, loc=0.0, scale=1.0, size=None, chunks="auto", dtype=None, **kwargs):
        return _normal(loc, scale, size, chunks, dtype, self._seed, kwargs)

    def uniform(self, low=0.0, high=1.0, size=None, chunks="auto", dtype=None, **kwargs):
        return _uniform(low, high, size, chunks, dtype, self._seed, kwargs)

    def standard_normal(self, size=None, chunks="auto", dtype=None):
        return _normal(0.0, 1.0, size, chunks, dtype, self._seed, {})

    def random(self, size=None, chunks="auto", dtype=None):
        return _uniform(0.0, 1.0, size, chunks, dtype, self._seed, {})


def _no_extra(kwargs, what):
    if kwargs:
        raise TypeError(f"{what}() got unexpected arguments: {', '.join(kwargs)}")


def _normal(loc, scale, size, chunks, dtype, seed, kwargs):
    _no_extra(kwargs, "normal")
    if not (isinstance(scale, numbers.Real) and scale >= 0):
        raise ValueError(f"normal: scale must be >= 0 (got {scale})")
    return Array(shape=_shape(size), chunks=chunks, dtype=dtype, generator="normal", param0=loc, param1=scale,
                 seed=_fresh_seed() if seed is None else seed)


def _uniform(low, high, size, chunks, dtype, seed, kwargs):
    _no_extra(kwargs, "uniform")
    if high < low:
        raise ValueError(f"uniform: high must be >= low {low} (got {high})")
    return Array(shape=_shape(size), chunks=chunks, dtype=dtype, generator="uniform", param0=low, param1=high,
                 seed=_fresh_seed() if seed is None else seed)


def _random_normal(loc=0.0, scale=1.0, size=None, chunks="auto", dtype=None, seed=None, **kwargs):
    """normal(loc, scale) samples (Philox4x32-10 by global position: same values for any chunks)."""
    return _normal(loc, scale, size, chunks, dtype, seed, kwargs)


def _random_uniform(low=0.0, high=1.0, size=None, chunks="auto", dtype=None, seed=None, **kwargs):
    """uniform(low, high) samples (Philox4x32-10 by global position)."""
    return _uniform(low, high, size, chunks, dtype, seed, kwargs)


random = types.SimpleNamespace(normal=_random_normal, uniform=_random_uniform, RandomState=RandomState,
                               default_rng=RandomState)


def arange(start, stop=None, step=1, *, chunks="auto", dtype=None):
    """start, start + step, ... below stop (1-D, float; .reshape(rows, cols) for 2-D)."""
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange: step must not be 0")
    n = max(0, math.ceil((stop - start) / step))
    if n == 0:
        raise ValueError(f"arange({start}, {stop}, {step}) is empty: psched arrays have at least one element")
    if dtype is not None and _np is not None and _np.dtype(dtype).kind in "iu":
        raise TypeError(f"psched arrays are float64 or float32 (got dtype {_np.dtype(dtype).name}; "
                        f"arange's integers are exact in float64 up to 2**53)")
    return Array(shape=(n,), chunks=chunks, dtype=dtype, generator="arange", param0=start, param1=step)


def full(shape, fill_value, *, chunks="auto", dtype=None):
    return Array(shape=_shape(shape), chunks=chunks, dtype=dtype, generator="constant",
                 param0=_scalar(fill_value, "full"))


def ones(shape, *, chunks="auto", dtype=None):
    return full(shape, 1.0, chunks=chunks, dtype=dtype)


def zeros(shape, *, chunks="auto", dtype=None):
    return full(shape, 0.0, chunks=chunks, dtype=dtype)
