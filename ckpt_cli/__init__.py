"""ckpt: inspect, validate, replay and clean Spark Structured Streaming checkpoints.

The library is the product; :mod:`ckpt_cli.cli` is a thin Typer layer over it.

    >>> import ckpt_cli
    >>> ckpt = ckpt_cli.open("fixtures/checkpoints/spark4-hdfs-agg/checkpoint")
    >>> ckpt.versions(); ckpt.validate().ok; ckpt.replay(operator=0).to_pandas()
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ckpt_cli.errors import CkptError
from ckpt_cli.model import Checkpoint
from ckpt_cli.storage import Storage, StorageStats

__version__ = "0.1.0"

__all__ = ["Checkpoint", "CkptError", "Storage", "StorageStats", "__version__", "open"]


def open(  # noqa: A001 - ckpt_cli.open, like fsspec.open
    location: str, storage_options: Mapping[str, Any] | None = None
) -> Checkpoint:
    """The checkpoint at ``location`` (a path or URL: s3://, abfs://, gs://, memory://...),
    listed once; ``storage_options`` go to the filesystem (e.g. ``endpoint_url``)."""
    return Checkpoint.open(location, storage_options)
