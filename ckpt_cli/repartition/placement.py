"""Where each raw state record goes, for a whole store: :func:`ckpt_cli.repartition.keys.key_placer`
with the column family ids of the zip the records came from, its refusals as one
:class:`UnsupportedOperator` line."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ckpt_cli.errors import CkptError, FormatError
from ckpt_cli.formats.rocksdb import RocksDBCheckpointMetadata
from ckpt_cli.model import Checkpoint
from ckpt_cli.repartition.keys import key_placer

# raw keys -> their new partitions
Placer = Callable[[Sequence[bytes]], npt.NDArray[np.int64]]


class UnsupportedOperator(CkptError):
    code = "UNSUPPORTED_OPERATOR"


def placer(
    ckpt: Checkpoint,
    operator: int,
    store: str,
    partitions: int,
    template: RocksDBCheckpointMetadata | None,
) -> Placer:
    """The new partitions of raw keys of ``store``; ``template``: the metadata of one of its
    zips (the column family ids of a store with families)."""
    cf_ids = template.column_family_mapping if template is not None else None
    try:
        keys = key_placer(ckpt, operator, store, cf_ids)
    except FormatError as exc:
        raise UnsupportedOperator(f"cannot repartition: {exc.message}", hint=exc.hint) from exc

    def place(raw_keys: Sequence[bytes]) -> npt.NDArray[np.int64]:
        try:
            return keys.partitions(raw_keys, partitions)
        except FormatError as exc:
            raise UnsupportedOperator(f"cannot repartition: {exc.message}") from exc

    return place
