"""The Array and Reduction classes of psched.array (see the package's docstring)."""

import math
import numbers

try:
    import numpy as _np
except ImportError:  # numpy is optional: dtypes are then plain strings
    _np = None

__all__ = ["Array", "Reduction"]

_SUPPORTED = ("psched arrays support: x * a + b with scalars a, b (in any spelling: x + 1, 2 * x, "
              "(x - 3) / 2, -x); slices with positive steps on each axis (x[10:9000:3, ::2]); "
              "x.sum(), x.mean(), x.min(), x.max(), x.count() over the whole array")
_AUTO_CHUNK_BYTES = 128 << 20  # chunks='auto': about dask's default chunk size
# Element sizes of the dtypes an array in files may hold (core/job_spec.h's DType); a generator
# makes the first two only.
_ITEMSIZE = {"float64": 8, "float32": 4, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "uint16": 2,
             "uint32": 4, "uint64": 8, "bool": 1}
_GENERATED = ("float64", "float32")


def _unsupported(what):
    return NotImplementedError(f"{what} is not supported: {_SUPPORTED}")


def _dtype_name(dtype, allowed=_GENERATED):
    """The name of a dtype among `allowed` (TypeError otherwise); None is float64."""
    if dtype is None:
        return "float64"
    if _np is not None:
        try:
            name = _np.dtype(dtype).name
        except TypeError:
            name = str(dtype)
    else:
        name = {float: "float64", "f8": "float64", "f4": "float32"}.get(dtype, str(dtype))
    if name not in allowed:
        what = "float64 or float32" if allowed is _GENERATED else ", ".join(allowed)
        raise TypeError(f"psched arrays are {what} (got dtype {name})")
    return name


def _scalar(value, op):
    """The float a scalar operand stands for; TypeError for anything that is not one number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        if _np is not None and isinstance(value, _np.ndarray) and value.ndim == 0:
            value = value.item()
        elif isinstance(value, (Array, Reduction)):
            raise TypeError(f"x {op} y of two psched arrays (or of an array and a reduction) is not "
                            f"supported: {_SUPPORTED}")
        else:
            raise TypeError(f"x {op} {type(value).__name__} is not supported: {_SUPPORTED}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"x {op} {value}: the expression's scale and offset must be finite")
    return value


class _Axis:
    """One axis of a view: the elements start, start + step, ... (count of them) of the base axis."""
    __slots__ = ("start", "step", "count")

    def __init__(self, start, step, count):
        self.start, self.step, self.count = start, step, count

    def sliced(self, key):
        if key.step is not None and not isinstance(key.step, numbers.Integral):
            raise TypeError(f"slice steps must be integers (got {key.step!r})")
        for bound in (key.start, key.stop):
            if bound is not None and not isinstance(bound, numbers.Integral):
                raise TypeError(f"slice bounds must be integers (got {bound!r})")
        if key.step is not None and key.step <= 0:
            raise _unsupported(f"a slice with step {key.step} (negative steps reverse the axis)")
        start, stop, step = key.indices(self.count)
        count = len(range(start, stop, step))
        return _Axis(self.start + start * self.step, self.step * step, count)

    def stop(self):
        """The exclusive stop of the job's selection: just past the last element."""
        return self.start + (self.count - 1) * self.step + 1 if self.count else self.start

    def block_counts(self, chunk, length):
        """Elements of this view in each of the base axis's blocks (dask's .chunks of a slice)."""
        counts = []
        for b0 in range(0, length, chunk):
            b1 = min(b0 + chunk, length)
            first = max(0, -(-(b0 - self.start) // self.step))
            last = min(self.count, -(-(b1 - self.start) // self.step))  # exclusive
            if last > first:
                counts.append(last - first)
        return tuple(counts) if counts else (0,)


class Array:
    """A lazy psched array: a source (a generator, or an array in files: `stored`, made by
    psched.array.from_npy & co.), scale * x + offset, one strided selection per axis."""

    __array_priority__ = 100  # numpy defers to our operators (np.float64(2) * x)

    def __init__(self, *, shape, chunks, dtype, generator=None, param0=0.0, param1=0.0, seed=0, stored=None):
        self._ndim = len(shape)
        if self._ndim not in (1, 2):
            raise _unsupported(f"a {self._ndim}-D array (1-D and 2-D are)")
        rows, cols = (1, shape[0]) if self._ndim == 1 else shape
        for n in (rows, cols):
            if not isinstance(n, numbers.Integral) or n <= 0:
                raise ValueError(f"array sides must be positive integers (got shape {tuple(shape)})")
        self._rows, self._cols = int(rows), int(cols)
        self._stored = stored  # None: the generator makes the elements
        self._dtype = _dtype_name(dtype, _GENERATED if stored is None else tuple(_ITEMSIZE))
        self._chunk_rows, self._chunk_cols = self._normalize_chunks(chunks)
        self._generator, self._param0, self._param1 = generator, float(param0), float(param1)
        self._seed = int(seed)
        self._scale, self._offset = 1.0, 0.0
        self._row_axis = _Axis(0, 1, self._rows)
        self._col_axis = _Axis(0, 1, self._cols)
        self._check_job()

    def _normalize_chunks(self, chunks):
        sides = (self._rows, self._cols) if self._ndim == 2 else (self._cols,)
        if (chunks is None or chunks == "auto") and self._stored is not None:
            chunks = self._stored.default_chunks(self._ndim)  # the file's (a Zarr store's own)
        itemsize = _ITEMSIZE[self._dtype]
        if chunks is None or chunks == "auto":
            per_axis = int((_AUTO_CHUNK_BYTES // itemsize) ** (1.0 / self._ndim))
            chunks = tuple(min(n, per_axis) for n in sides)
        if isinstance(chunks, numbers.Integral):
            chunks = (chunks,) * self._ndim
        if not isinstance(chunks, (tuple, list)) or len(chunks) != self._ndim:
            raise ValueError(f"chunks must be an int or a tuple of {self._ndim} ints (got {chunks!r})")
        out = []
        for c, n in zip(chunks, sides):
            if isinstance(c, (tuple, list)):  # dask's explicit block sizes: regular grids only
                if not c or any(b != c[0] for b in c[:-1]) or c[-1] > c[0] or sum(c) != n:
                    raise _unsupported(f"irregular chunks {tuple(c)} (equal blocks, the last one "
                                       f"smaller, are)")
                c = c[0]
            if c is None or c == -1:
                c = n
            if not isinstance(c, numbers.Integral) or c <= 0:
                raise ValueError(f"chunk sides must be positive integers (got {chunks!r})")
            out.append(min(int(c), n))
        return (1, out[0]) if self._ndim == 1 else tuple(out)

    def _derive(self, **changes):
        out = object.__new__(Array)
        out.__dict__.update(self.__dict__)
        out.__dict__.update({"_" + k: v for k, v in changes.items()})
        return out

    # --- dask.array's attributes -----------------------------------------------------------------
    def _axes(self):
        return (self._row_axis, self._col_axis) if self._ndim == 2 else (self._col_axis,)

    @property
    def shape(self):
        return tuple(a.count for a in self._axes())

    @property
    def ndim(self):
        return self._ndim

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def dtype(self):
        return _np.dtype(self._dtype) if _np is not None else self._dtype

    @property
    def itemsize(self):
        return _ITEMSIZE[self._dtype]

    @property
    def nbytes(self):
        return self.size * self.itemsize

    @property
    def chunks(self):
        rows = self._row_axis.block_counts(self._chunk_rows, self._rows)
        cols = self._col_axis.block_counts(self._chunk_cols, self._cols)
        return (rows, cols) if self._ndim == 2 else (cols,)

    @property
    def chunksize(self):
        return tuple(max(c) for c in self.chunks)

    @property
    def numblocks(self):
        return tuple(len(c) for c in self.chunks)

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return (f"psched.Array<{self._describe()}, shape={self.shape}, dtype={self._dtype}, "
                f"chunksize={self.chunksize}>")

    def _describe(self):
        if self._stored is not None:
            gen = self._stored.describe()
        else:
            gen = {"normal": f"normal({self._param0:g}, {self._param1:g}, seed={self._seed})",
                   "uniform": f"uniform({self._param0:g}, {self._param1:g}, seed={self._seed})",
                   "arange": f"arange(start={self._param0:g}, step={self._param1:g})",
                   "constant": f"full({self._param0:g})"}[self._generator]
        expr = "x"
        if self._scale != 1.0:
            expr = f"{self._scale:g} * x"
        if self._offset != 0.0:
            expr += f" + {self._offset:g}"
        return f"{expr} over {gen}"

    # --- x * a + b ----------------------------------------------------------------------------
    # Composed algebraically: (s*x + o) * a is (s*a)*x + o*a. The job rounds scale*x, then +offset
    # (no fma), so a composition that rounds differently from NumPy's step by step can differ in
    # the last bit; on integer data in the exact range both are exact.
    def _affine(self, scale, offset):
        return self._derive(scale=self._scale * scale, offset=self._offset * scale + offset)

    def __add__(self, other):
        return self._affine(1.0, _scalar(other, "+"))

    def __radd__(self, other):
        return self._affine(1.0, _scalar(other, "+"))

    def __sub__(self, other):
        return self._affine(1.0, -_scalar(other, "-"))

    def __rsub__(self, other):
        return self._affine(-1.0, _scalar(other, "-"))

    def __mul__(self, other):
        return self._affine(_scalar(other, "*"), 0.0)

    def __rmul__(self, other):
        return self._affine(_scalar(other, "*"), 0.0)

    def __truediv__(self, other):
        divisor = _scalar(other, "/")
        if divisor == 0:
            raise ZeroDivisionError("x / 0: the expression's scale must be finite")
        return self._affine(1.0 / divisor, 0.0)

    def __neg__(self):
        return self._affine(-1.0, 0.0)

    def __pos__(self):
        return self

    def __rtruediv__(self, other):
        raise _unsupported("a / x (not of the form x * a + b)")

    def _refuse(name):  # noqa: N805 - builds the refusing methods below
        def method(self, *args, **kwargs):
            raise _unsupported(name)
        method.__name__ = name
        return method

    __pow__ = __rpow__ = _refuse("x ** y")
    __floordiv__ = __rfloordiv__ = _refuse("x // y")
    __mod__ = __rmod__ = _refuse("x % y")
    __matmul__ = __rmatmul__ = _refuse("x @ y")
    __abs__ = _refuse("abs(x)")
    __lt__ = __le__ = __gt__ = __ge__ = _refuse("comparing an array (x < y)")
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __invert__ = _refuse("x & y, x | y, ~x")
    __iter__ = _refuse("iterating over an array")
    __float__ = __int__ = __bool__ = _refuse("converting an array to a number (reduce it first: x.sum())")
    __array__ = _refuse("turning a psched array into a NumPy array (psched returns reductions)")
    astype = _refuse("astype (arrays keep their generator's or file's dtype)")
    transpose = T = property(_refuse("transposing"))
    compute = _refuse("computing an array's elements (compute a reduction: x.sum().compute())")
    del _refuse

    _UFUNCS = {"add": "__add__", "subtract": "__sub__", "multiply": "__mul__", "true_divide": "__truediv__",
               "negative": "__neg__", "positive": "__pos__"}
    _REFLECTED = {"add": "__radd__", "subtract": "__rsub__", "multiply": "__rmul__",
                  "true_divide": "__rtruediv__"}

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy's scalars and ufuncs: np.float64(2) * x works, np.sin(x) says what is supported."""
        if method != "__call__" or kwargs or ufunc.__name__ not in self._UFUNCS:
            raise _unsupported(f"numpy.{ufunc.__name__}{'.' + method if method != '__call__' else ''}")
        if len(inputs) == 1:
            return getattr(self, self._UFUNCS[ufunc.__name__])()
        a, b = inputs
        if a is self:
            return getattr(self, self._UFUNCS[ufunc.__name__])(b)
        return getattr(self, self._REFLECTED[ufunc.__name__])(a)

    def __array_function__(self, func, types_, args, kwargs):
        """np.sum(x), np.mean(x), np.min(x), np.max(x) as the methods; nothing else."""
        name = {"amin": "min", "amax": "max"}.get(func.__name__, func.__name__)
        if name in ("sum", "mean", "min", "max") and len(args) == 1 and args[0] is self:
            return getattr(self, name)(**kwargs)
        raise _unsupported(f"numpy.{func.__name__}")

    # --- selection ------------------------------------------------------------------------------
    def __getitem__(self, key):
        keys = key if isinstance(key, tuple) else (key,)
        if sum(k is Ellipsis for k in keys) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if Ellipsis in keys:
            i = keys.index(Ellipsis)
            keys = keys[:i] + (slice(None),) * (self._ndim - len(keys) + 1) + keys[i + 1:]
        if len(keys) > self._ndim:
            raise IndexError(f"too many indices for a {self._ndim}-D array: {len(keys)} were given")
        for k in keys:
            if not isinstance(k, slice):
                kind = ("None (a new axis)" if k is None else
                        "an integer index (use a slice: x[5:6])" if isinstance(k, numbers.Integral) else
                        f"indexing with {type(k).__name__} (fancy indexing)")
                raise _unsupported(kind)
        keys = keys + (slice(None),) * (self._ndim - len(keys))
        if self._ndim == 1:
            return self._derive(col_axis=self._col_axis.sliced(keys[0]))
        return self._derive(row_axis=self._row_axis.sliced(keys[0]), col_axis=self._col_axis.sliced(keys[1]))

    def _is_whole(self):
        return self.shape == ((self._rows, self._cols) if self._ndim == 2 else (self._cols,))

    def reshape(self, *shape):
        """A 1-D array as rows x cols, row-major (what the job's arange is): whole arrays only."""
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        if not self._is_whole():
            raise _unsupported("reshaping a sliced array")
        shape = tuple(shape)
        if -1 in shape and len(shape) == 2:
            known = shape[1 - shape.index(-1)]
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        if math.prod(shape) != self.size or len(shape) not in (1, 2):
            raise ValueError(f"cannot reshape an array of size {self.size} into shape {shape}")
        if shape == self.shape:
            return self
        if self._stored is not None:
            raise _unsupported("reshaping an array in files (its file says its shape)")
        if self._ndim == 2 and len(shape) == 2:
            raise _unsupported("reshaping a 2-D array to another 2-D shape (reshape a 1-D arange)")
        if self._ndim == 2:
            raise _unsupported("flattening a 2-D array")
        rows, cols = shape
        # About the same number of elements per chunk as the 1-D chunks had.
        chunk_cols = min(cols, self._chunk_cols)
        chunk_rows = max(1, min(rows, self._chunk_cols // cols)) if cols <= self._chunk_cols else 1
        return self._derive(ndim=2, rows=rows, cols=cols, chunk_rows=chunk_rows, chunk_cols=chunk_cols,
                            row_axis=_Axis(0, 1, rows), col_axis=_Axis(0, 1, cols))._check_job()

    def _check_job(self):
        """The checks the scheduler makes (libpclient's validate(), the scheduler's own): a grid it
        would refuse (a chunk too large, too many chunks) fails here, where it is written."""
        from .. import _native
        try:
            self._job().validate()
        except _native.Error as e:
            raise ValueError(f"psched cannot run this array: {e}") from None
        return self

    def rechunk(self, chunks):
        """New chunk sides (the array's values stay; a sum's last bits follow the chunking)."""
        if not self._is_whole():
            raise _unsupported("rechunking a sliced array (rechunk before slicing)")
        out = self._derive()
        out._chunk_rows, out._chunk_cols = out._normalize_chunks(chunks)
        return out._check_job()

    # --- reductions --------------------------------------------------------------------------------
    def _reduction(self, kind, axis, dtype, keepdims, kwargs, ddof=0):
        if axis is not None:
            axes = axis if isinstance(axis, (tuple, list)) else (axis,)
            if sorted(a % self._ndim for a in axes) != list(range(self._ndim)):
                raise _unsupported(f"x.{kind}(axis={axis!r})")
        if dtype is not None and _dtype_name(dtype, tuple(_ITEMSIZE)) != self._dtype:
            raise _unsupported(f"x.{kind}(dtype={dtype!r})")
        if keepdims:
            raise _unsupported(f"x.{kind}(keepdims=True)")
        for name, value in kwargs.items():
            if name not in ("split_every", "out") or (name == "out" and value is not None):
                raise _unsupported(f"x.{kind}({name}=...)")
        if not isinstance(ddof, int) or ddof < 0:
            raise ValueError(f"x.{kind}(ddof=...) takes an integer >= 0 (got {ddof!r})")
        return Reduction(self, kind, ddof)

    def sum(self, axis=None, dtype=None, keepdims=False, **kwargs):
        return self._reduction("sum", axis, dtype, keepdims, kwargs)

    def mean(self, axis=None, dtype=None, keepdims=False, **kwargs):
        return self._reduction("mean", axis, dtype, keepdims, kwargs)

    def min(self, axis=None, keepdims=False, **kwargs):
        return self._reduction("min", axis, None, keepdims, kwargs)

    def max(self, axis=None, keepdims=False, **kwargs):
        return self._reduction("max", axis, None, keepdims, kwargs)

    def var(self, axis=None, dtype=None, ddof=0, keepdims=False, **kwargs):
        """The variance, correctly rounded from the exact sums of x and x**2 (numpy's ddof): the same
        bits on any chunking, worker count or backend. NaN when count <= ddof or an element is NaN or
        infinite; inf when a square overflows (|x| >= 2**512)."""
        return self._reduction("var", axis, dtype, keepdims, kwargs, ddof)

    def std(self, axis=None, dtype=None, ddof=0, keepdims=False, **kwargs):
        """The standard deviation: the correctly rounded square root of the exact variance."""
        return self._reduction("std", axis, dtype, keepdims, kwargs, ddof)

    def count(self, axis=None, keepdims=False, **kwargs):
        """Number of selected elements (computed on the cluster with the rest)."""
        return self._reduction("count", axis, None, keepdims, kwargs)

    def _job(self):
        """This array's job as libpclient's Job (the reduction kind is the caller's)."""
        from .. import _native
        job = _native.Job()
        job.rows, job.cols = self._rows, self._cols
        job.chunk_rows, job.chunk_cols = self._chunk_rows, self._chunk_cols
        job.dtype = self._dtype
        if self._stored is None:
            job.generator, job.param0, job.param1, job.seed = self._generator, self._param0, self._param1, self._seed
        else:
            job.input = self._stored.input  # libpclient reads the file's header again at each submit
        job.scale, job.offset = self._scale, self._offset
        job.row_start, job.row_step, job.row_stop = self._row_axis.start, self._row_axis.step, self._row_axis.stop()
        job.col_start, job.col_step, job.col_stop = self._col_axis.start, self._col_axis.step, self._col_axis.stop()
        return job


class Reduction:
    """A lazy reduction of an Array: .compute() runs its job (one job gives every figure)."""

    from .._native import FIGURES as _FIGURES  # client/figures.h's table, by name
    FIGURES = {f["name"]: f for f in _FIGURES}
    KINDS = tuple(FIGURES)

    def __init__(self, array, kind, ddof=0):
        assert kind in self.KINDS, kind
        self.array, self.kind, self.ddof = array, kind, ddof
        self._cached_job = None

    def job(self):
        """The libpclient Job this reduction runs (a copy of its own)."""
        job = self.array._job()
        job.squares = self.FIGURES[self.kind]["squares"]  # the workers sum squares only then
        return job

    def _job_to_run(self):
        # Built once: arrays never change, and building one costs ~6 us, half of what Python adds
        # to a tiny job (bench/python_latency.py).
        if self._cached_job is None:
            self._cached_job = self.job()
        return self._cached_job

    def compute(self, client=None, **kwargs):
        """Runs the job and returns a psched.Result (a float: this reduction's value). Blocks;
        Ctrl-C cancels the job. kwargs: progress (None: a bar on long jobs, True, False), devices,
        verify (share of chunks computed twice and compared; result.mismatches)."""
        from .._context import default_client
        return (client or default_client()).run(self, **kwargs)

    def __float__(self):
        return float(self.compute())

    def __repr__(self):
        ddof = f"(ddof={self.ddof})" if self.FIGURES[self.kind]["ddof"] else ""
        return f"psched.Reduction<{self.kind}{ddof} of {self.array!r}>"

    def _refuse(self, *args, **kwargs):
        raise _unsupported("arithmetic on a reduction before it is computed (compute it first)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _refuse
