"""``ckpt versions``: batches, operators, stores, partitions and state store versions.

:func:`describe_versions` returns one plain, JSON-ready dict (the schema is documented in the
README); the CLI renders it as Rich tables or writes it as JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ckpt_cli.errors import CkptError, FormatError
from ckpt_cli.formats import logs
from ckpt_cli.model import Checkpoint, FileKind, Partition


def _partition_json(part: Partition) -> dict[str, Any]:
    versions = part.version_ids
    snapshots = []
    ids: dict[str, list[str]] = {}
    for v, sv in part.versions.items():
        if sv.is_snapshot:
            snapshots.append(v)
        if sv.files[0].unique_id is not None or len(sv.files) > 1:
            unique = sv.unique_ids
            if unique:
                ids[str(v)] = unique
    out: dict[str, Any] = {
        "id": part.id,
        "path": part.path,
        "versions": versions,
        "min_version": versions[0] if versions else None,
        "max_version": versions[-1] if versions else None,
        "snapshot_versions": snapshots,
        "files": len(part.files),
        "bytes": part.bytes,
        "shared_files": len(part.shared_files),
    }
    # Checkpoint format v2: the uniqueIds of each version's files (several after retries).
    if ids:
        out["unique_ids"] = ids
    return out


def describe_versions(
    checkpoint: Checkpoint,
    operator: int | None = None,
    partitions: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Everything ``ckpt versions`` shows, as a JSON-ready dict."""
    ops = checkpoint.operators
    if operator is not None and operator not in ops:
        known = ", ".join(str(o) for o in ops) or "none"
        raise CkptError(
            f"{checkpoint.storage.url}: operator {operator} has no state (operators: {known})"
        )
    wanted_parts = set(partitions) if partitions else None
    batches = checkpoint.batches
    latest = checkpoint.latest_offsets
    conf = checkpoint.conf

    operators_json = []
    for op in ops.values():
        if operator is not None and op.id != operator:
            continue
        try:
            meta = checkpoint.operator_metadata(op.id)
        except FormatError:
            meta = None  # Spark restarts without it too; validate reports it
        stores_json = []
        for store in op.stores.values():
            parts = [
                _partition_json(p)
                for p in store.partitions.values()
                if wanted_parts is None or p.id in wanted_parts
            ]
            all_versions = [v for p in store.partitions.values() for v in p.versions]
            stores_json.append(
                {
                    "name": store.name,
                    "provider": store.provider,
                    "schema_files": [f.path for f in store.schema_files],
                    "num_partitions": len(store.partitions),
                    "min_version": min(all_versions) if all_versions else None,
                    "max_version": max(all_versions) if all_versions else None,
                    "partitions": parts,
                }
            )
        operators_json.append(
            {
                "id": op.id,
                "name": meta.operator_name if meta else None,
                "path": op.path,
                "metadata_files": [f.path for f in op.metadata_files],
                "stores": stores_json,
            }
        )

    total_bytes = sum(f.entry.size for f in checkpoint.files)
    return {
        "checkpoint": checkpoint.storage.url,
        "query_id": checkpoint.query_id,
        "batches": {
            "offsets": list(batches.offsets),
            "commits": list(batches.commits),
            "latest_offsets": batches.latest_offsets,
            "latest_committed": batches.latest_committed,
            "in_flight": list(batches.in_flight),
            "offsets_gaps": list(batches.offsets_gaps),
            "commits_gaps": list(batches.commits_gaps),
            "commits_without_offsets": list(batches.commits_without_offsets),
            "latest_batch_watermark_ms": latest.batch_watermark_ms if latest else None,
            "latest_batch_timestamp_ms": latest.batch_timestamp_ms if latest else None,
        },
        "settings": {
            "shuffle_partitions": latest.shuffle_partitions if latest else None,
            "state_store_provider": checkpoint.configured_provider,
            "compression_codec": conf.get(logs.COMPRESSION_CODEC, "lz4") if latest else None,
            "checkpoint_format_version": checkpoint.checkpoint_format_version,
            "offsets_log_version": latest.log_version if latest else None,
            "sources": len(latest.source_offsets) if latest else None,
        },
        "conf": conf,
        "operators": operators_json,
        "files": {
            "count": len(checkpoint.files),
            "bytes": total_bytes,
            "by_kind": checkpoint.count_by_kind(),
            "temp": [f.path for f in checkpoint.of_kind(FileKind.TEMP)],
            "unknown": [f.path for f in checkpoint.of_kind(FileKind.UNKNOWN)],
        },
    }
