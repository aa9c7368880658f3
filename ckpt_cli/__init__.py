"""ckpt: inspect, validate, replay and clean Spark Structured Streaming checkpoints.

The library is the product; :mod:`ckpt_cli.cli` is a thin Typer layer over it.

    >>> import ckpt_cli
    >>> ckpt = ckpt_cli.open("fixtures/checkpoints/spark4-hdfs-agg/checkpoint")
    >>> ckpt.versions(); ckpt.validate().ok; ckpt.replay(operator=0).to_pandas()
"""

from __future__ import annotations

from ckpt_cli.api import Checkpoint, open
from ckpt_cli.errors import CkptError
from ckpt_cli.storage import Storage, StorageStats
from ckpt_cli.version import __version__

__all__ = ["Checkpoint", "CkptError", "Storage", "StorageStats", "__version__", "open"]
