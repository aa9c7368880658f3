"""Where each raw state record goes: its key decoded with the store's schema (per column
family in a store with several), then :mod:`ckpt_cli.repartition.keys` (Spark's shuffle
hash of the operator's partitioning columns, ``pmod`` the new count)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ckpt_cli.errors import CkptError, FormatError
from ckpt_cli.formats import state_encoders as encoders
from ckpt_cli.formats.rocksdb import RocksDBCheckpointMetadata
from ckpt_cli.model import Checkpoint
from ckpt_cli.repartition.keys import PartitionKey, operator_partition_keys
from ckpt_cli.replay.read import store_schema
from ckpt_cli.replay.source import decoder_for

# (raw key, raw value) -> new partition
Placer = Callable[[bytes, bytes], int]


class UnsupportedOperator(CkptError):
    code = "UNSUPPORTED_OPERATOR"


def placer(
    ckpt: Checkpoint,
    operator: int,
    store: str,
    partitions: int,
    template: Callable[[], RocksDBCheckpointMetadata | None],
) -> Placer:
    """The new partition of each record of ``store``; ``template``: the metadata of one of
    its zips (the column family ids), asked for only by stores with column families."""
    try:
        keys = operator_partition_keys(ckpt, operator)[store]
    except FormatError as exc:
        raise UnsupportedOperator(
            f"state/{operator}: cannot repartition: {exc.message}", hint=exc.hint
        ) from exc
    schema = store_schema(ckpt, operator, store)
    families = [cf for cf in (schema.column_families if schema else ()) if cf.name in keys]
    if not families or store in keys:
        decode = decoder_for(ckpt, operator, store).key
        only = keys[store]
        return lambda key, _value: only.partition(decode(key), partitions)
    meta = template()
    mapping = meta.column_family_mapping if meta is not None else {}
    encoding = encoders.state_encoding(ckpt.conf)
    path = f"state/{operator}"
    by_id: dict[int, tuple[Callable[[bytes], Any], PartitionKey]] = {}
    for cf in families:
        if cf.name not in mapping:
            continue  # no record of this family yet
        decode_key = encoders.make_key_decoder(
            cf.key,
            cf.key_encoder,
            column_families=True,
            encoding=encoding,
            path=path,
            key_writers={cf.key_schema_id: cf.key},
        )
        by_id[mapping[cf.name]] = (decode_key, keys[cf.name])
    names = {v: k for k, v in mapping.items()}

    def place(key: bytes, _value: bytes) -> int:
        cf_id = int.from_bytes(key[:2], "little", signed=True)
        found = by_id.get(cf_id)
        if found is None:
            family = names.get(cf_id, f"id {cf_id}")
            raise UnsupportedOperator(
                f"{path}: a record of column family {family} that ckpt cannot place "
                "(no partitioning key for it)"
            )
        decode_key, partition_key = found
        return partition_key.partition(decode_key(key).key, partitions)

    return place
