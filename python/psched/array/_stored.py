"""Arrays in files, as dask.array opens them: from_npy, from_npy_stack, from_zarr, from_raw, and
from_array for an array in this process's memory (written once as a .npy file the workers read).

The workers read the data, never this process nor the scheduler (docs/design.md, "Stored
arrays"): the path must be readable by every worker at the same place (a shared filesystem, or the
same copy on every node; a LocalCluster's workers see this host's files). Here only the header or
metadata is read, through libpclient, which refuses a missing, unreadable, truncated or unknown file
with one line naming it: FileNotFoundError or PermissionError where the file cannot be opened,
ValueError otherwise. Reductions, slices and x * a + b work as on a generated array; the sum is the
exact sum of the stored elements, correctly rounded (64-bit integers past 2**53 included), the same
bits whatever the chunks and workers."""

import errno
import os
import tempfile
import uuid

from ._core import Array, _ITEMSIZE, _dtype_name, _np

FROM_ARRAY_MAX_BYTES = 1 << 30  # from_array's default limit (max_bytes): a copy on disk per call


class _Stored:
    """An array in files: libpclient's Input (what every job of the array carries) and what its
    header says (storage/open.h: shape, dtype, the chunks a job gets by default)."""
    __slots__ = ("input", "info")

    def __init__(self, native_input, info):
        self.input, self.info = native_input, info

    def shape(self):
        """1-D as stored; 2-D or more as the 2-D view the workers read (leading axes flattened)."""
        shape = tuple(self.info["shape"])
        return shape if len(shape) == 1 else (self.info["rows"], self.info["cols"])

    def default_chunks(self, ndim):
        rows, cols = self.info["chunk_rows"], self.info["chunk_cols"]
        return (rows, cols) if ndim == 2 else (cols,)

    def describe(self):
        return f"{self.info['format']} {self.input.path!r}"


def _error(message):
    """libpclient's one line as the exception a Python user expects of a file."""
    for code, kind in ((errno.ENOENT, FileNotFoundError), (errno.EACCES, PermissionError)):
        if ": " + os.strerror(code) in message:
            return kind(message)
    return ValueError(message)


def _open(path, fmt, *, dtype="", shape=(), offset=0, byte_order=""):
    from .. import _native
    native_input = _native.Input()
    # Absolute: the workers do not run in this process's working directory.
    native_input.path = os.path.abspath(os.fspath(path))
    native_input.format, native_input.dtype, native_input.shape = fmt, dtype, list(shape)
    native_input.offset, native_input.byte_order = offset, byte_order
    try:
        return _Stored(native_input, _native.open_array(native_input))
    except _native.Error as e:
        raise _error(str(e)) from None


def _array(stored, chunks):
    return Array(shape=stored.shape(), chunks=chunks, dtype=stored.info["dtype"], stored=stored)


def from_npy(path, chunks="auto"):
    """The array in a .npy file (header versions 1-3, C or Fortran order; float64, float32,
    int8-int64, uint8-uint64 or bool, either byte order). chunks: as dask's ('auto': whole rows of
    about 2**24 elements, read contiguously). A 1-D file is a 1-D array; an N-D one (N > 2, C
    order) is its 2-D view, the leading axes flattened into rows."""
    return _array(_open(path, "npy"), chunks)


def from_npy_stack(dirname, chunks="auto"):
    """The .npy files of a directory stacked along axis 0, as da.to_npy_stack writes them (0.npy,
    1.npy, ... in numeric order; its `info` file is not read: the headers say everything). The
    files are 2-D or more, of one dtype and one shape past axis 0."""
    return _array(_open(dirname, "npy-stack"), chunks)


def from_zarr(url, component=None, chunks=None):
    """A Zarr v2 directory store (a path, or a zarr.Array on a DirectoryStore; component: the
    array's path inside a group): 1-D or 2-D, C order, compressor none, Zstd or Blosc (any cname),
    no filters; a chunk never written reads as the fill value. chunks: None or 'auto' is the
    store's own; others must be whole multiples of them (each stored chunk is read and
    decompressed once), else ValueError."""
    if not isinstance(url, (str, os.PathLike)):  # a zarr.Array: where its store keeps it
        if not isinstance(getattr(url.store, "path", None), str):
            raise ValueError(f"from_zarr reads Zarr v2 directory stores that every worker can read (got a "
                             f"{type(url.store).__name__})")
        component = os.path.join(url.path, component or "")
        url = url.store.path
    path = os.path.join(os.fspath(url), component) if component else url
    return _array(_open(path, "zarr"), chunks)


def from_raw(path, shape, dtype, offset=0, byte_order=None, chunks="auto"):
    """A file of bare elements: shape (an int or a tuple; N-D read as 2-D, leading axes
    flattened), dtype (float64, float32, int8-int64, uint8-uint64, bool), offset (bytes before the
    first element), byte_order ('little' or 'big'; default: the dtype's own, as in '>i4', else
    little)."""
    name = _dtype_name(dtype, tuple(_ITEMSIZE))
    # numpy spells a non-native order only ('>i4' here); the native one reads '=', saying nothing.
    spelled = {">": "big", "<": "little"}.get(_np.dtype(dtype).byteorder) if _np is not None else None
    if byte_order is None:
        byte_order = spelled or "little"
    elif spelled and _ITEMSIZE[name] > 1 and byte_order != spelled:
        raise ValueError(f"from_raw: dtype {dtype!r} is {spelled}-endian but byte_order is {byte_order!r}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return _array(_open(path, "raw", dtype=name, shape=shape, offset=int(offset), byte_order=byte_order), chunks)


def from_array(x, chunks="auto", *, directory=None, max_bytes=FROM_ARRAY_MAX_BYTES, client=None):
    """An array in this process's memory (a NumPy array or anything np.asarray takes), for the
    workers: written once as a .npy file in `directory`, which every worker must read at the same
    path, then read there as from_npy reads it. directory: default the LocalCluster's own
    temporary directory when the client (client=, else the default one) is connected to a
    LocalCluster, removed with it; for any other cluster give a shared directory (the file stays
    there: remove it when done). max_bytes: arrays larger than this (1 GiB by default) are refused,
    as each call writes a copy to disk: save a large array yourself (np.save to a shared path) and
    use from_npy, or pass max_bytes=None."""
    if _np is None:
        raise ImportError("psched.array.from_array needs numpy")
    a = _np.asarray(x)
    if a.ndim == 0:
        raise ValueError("from_array: a psched array has at least one dimension (got a scalar)")
    _dtype_name(a.dtype, tuple(_ITEMSIZE))
    if max_bytes is not None and a.nbytes > max_bytes:
        raise ValueError(f"from_array: the array holds {a.nbytes} bytes, more than max_bytes={max_bytes} (each call "
                         f"writes a copy to disk): np.save it to a shared path and use from_npy, or pass "
                         f"max_bytes=None")
    directory = os.fspath(directory) if directory is not None else _cluster_directory(client)
    path = os.path.join(directory, f"psched-array-{uuid.uuid4().hex}.npy")
    # Written under another name and renamed: a worker never sees half a file.
    fd, partial = tempfile.mkstemp(dir=directory, prefix=".psched-array-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            _np.lib.format.write_array(f, a, allow_pickle=False)
        os.replace(partial, path)
    except BaseException:
        os.unlink(partial)
        raise
    return from_npy(path, chunks)


def _cluster_directory(client):
    from .._context import default_client
    need = ("from_array writes the array to a file the workers read: pass directory=, a directory every worker "
            "can read at the same path (a shared filesystem)")
    if client is None:
        try:
            client = default_client()
        except RuntimeError:
            raise ValueError(f"{need}; there is no psched.Client to take a LocalCluster's from") from None
    directory = getattr(client.cluster, "local_directory", None)
    if directory is None:
        raise ValueError(f"{need}; only a LocalCluster's client has one of its own")
    return directory
