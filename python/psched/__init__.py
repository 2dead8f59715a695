"""psched for Python: the DeepOps sum.py on a psched cluster, spelled as dask spells it.

    import psched
    import psched.array as pa
    client = psched.Client("tcp://head:8786")     # or scheduler_file=..., or a LocalCluster
    x = pa.random.normal(10, 1, size=(500000, 500000), chunks=(10000, 10000), seed=0)
    total = (x + 1)[::2, ::2].sum()                # lazy
    print(total.compute())                         # or client.compute(total) -> Future
"""

from ._native import Cancelled, Error, version as __version__
from . import array
from .client import Client, default_client
from .cluster import LocalCluster
from .future import Future
from .result import Result

Error.__module__ = Cancelled.__module__ = __name__  # psched.Error in tracebacks, not psched._native.Error

__all__ = ["Client", "LocalCluster", "Future", "Result", "Error", "Cancelled", "array", "default_client"]
