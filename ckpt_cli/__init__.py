"""ckpt: inspect, validate, replay and clean Spark Structured Streaming checkpoints.

The library is the product; :mod:`ckpt_cli.cli` is a thin Typer layer over it.
"""

from ckpt_cli.errors import CkptError
from ckpt_cli.model import Checkpoint
from ckpt_cli.storage import Storage

__version__ = "0.1.0"

__all__ = ["Checkpoint", "CkptError", "Storage", "__version__"]
