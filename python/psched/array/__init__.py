"""psched.array: the arrays a psched cluster can sum, spelled as dask.array spells them.

An Array is lazy and is exactly what one psched job can compute (docs/design.md, "The job"): a
source over a 2-D grid of chunks, either a generator (normal, uniform, arange, constant) or an
array in files that every worker reads (from_npy, from_npy_stack, from_zarr, from_raw; from_array
writes one), the element-wise expression scale * x + offset, and one strided selection per axis.
Reductions (sum, mean, min, max, count) over the whole array give a Reduction; its .compute() runs
the job. Anything else raises here, at the line that asks for it, naming what is supported: a job
that cannot run must not get as far as the cluster.

    import psched.array as pa
    x = pa.random.normal(10, 1, size=(500000, 500000), chunks=(10000, 10000), seed=0)
    total = (x + 1)[::2, ::2].sum()
    y = pa.from_zarr("/shared/data.zarr")      # a path every worker reads
"""

from ._core import Array, Reduction
from ._creation import RandomState, arange, full, ones, random, zeros
from ._stored import from_array, from_npy, from_npy_stack, from_raw, from_zarr

__all__ = ["Array", "Reduction", "RandomState", "arange", "full", "ones", "zeros", "random", "from_npy",
           "from_npy_stack", "from_zarr", "from_raw", "from_array"]
