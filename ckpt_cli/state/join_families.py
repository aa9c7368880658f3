"""Stream-stream joins in state formats 3 and 4: the join's stores (``left-keyToNumValues``,
``left-keyWithTsToValues``...) are column families of one store, ``default``, per
partition. ``storeName`` names a family; ``joinSide`` reads the side's values by key (format
3: ``<side>-keyWithIndexToValue`` without ``index`` and ``matched``; format 4:
``<side>-keyWithTsToValues`` without ``matched``, the key with its ``__event_time``).

The families are read as transformWithState's (``state/tws.py``): ids from the zips'
``columnFamilyMapping``, schemas from the schema file v3.
"""

from __future__ import annotations

from dataclasses import dataclass

from ckpt_cli.core.layout import DEFAULT_STORE
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.core.read import store_schema
from ckpt_cli.errors import CkptError
from ckpt_cli.state.target import SelectionError
from ckpt_cli.state.tws import VariableReader, family_reader

JOIN_FORMAT_CONF = "spark.sql.streaming.join.stateFormatVersion"
# Format 4's families hold several values per key (Spark's multi-valued families).
MULTI_VALUED_SUFFIXES = ("keyWithTsToValues", "tsWithKey")


@dataclass(frozen=True)
class JoinFamily:
    """A read of one family of a join's ``default`` store."""

    operator: int
    family: str
    join_side: bool  # in the shape of Spark's joinSide rows


def join_format(ckpt: Checkpoint, operator: int) -> int | None:
    """The join state format (3 or 4) of an operator that keeps its stores as column
    families, or None (not a join, or format 1/2)."""
    version = ckpt.conf.get(JOIN_FORMAT_CONF, "2").strip()
    if not version.isdigit() or int(version) < 3 or operator not in ckpt.operators:
        return None
    prefix = f"state/{operator}/_metadata/v2/"
    metas = [e.path for e in ckpt.listing if e.path.startswith(prefix) and "/." not in e.path]
    if metas and b'"symmetricHashJoin"' in ckpt.storage.read_bytes(metas[0]):
        return int(version)
    return None


def join_family(
    ckpt: Checkpoint, operator: int | None, store: str | None, join_side: str | None
) -> JoinFamily | None:
    """The family a ``store`` / ``join_side`` read of a format 3/4 join decodes, or None
    for other operators. Errors name the operator and its families."""
    ops = [operator] if operator is not None else list(ckpt.operators)
    found = [(op, v) for op in ops if (v := join_format(ckpt, op)) is not None]
    if not found:
        return None
    op, version = found[0]
    path = f"state/{op}"
    families = join_families(ckpt, op)
    if join_side is not None:
        # Format 3: the side's values by key and index; format 4: by key and event time
        # (Spark's joinSide rows of format 4 carry a wrong event time: docs/state-formats.md).
        family = "keyWithIndexToValue" if version == 3 else "keyWithTsToValues"
        return JoinFamily(op, f"{join_side}-{family}", True)
    if store is None or store == DEFAULT_STORE:
        raise SelectionError(
            f"{path}: stream-stream join state format {version} keeps its stores as column "
            "families of one store: name one with {store} (" + ", ".join(families) + ")"
        )
    if store not in families:
        raise SelectionError(
            f"{path}: no column family {store!r}; the join has: " + ", ".join(families)
        )
    return JoinFamily(op, store, False)


def join_families(ckpt: Checkpoint, operator: int) -> list[str]:
    """The column families (Spark's storeNames) of a format 3/4 join's one store."""
    schema = store_schema(ckpt, operator, DEFAULT_STORE)
    if schema is None:
        raise CkptError(f"state/{operator}/_stateSchema: no schema file names the join's families")
    return [cf.name for cf in schema.column_families if cf.name != DEFAULT_STORE]


def join_family_reader(ckpt: Checkpoint, request: JoinFamily) -> VariableReader:
    """The reader of the family, in Spark's ``storeName`` or ``joinSide`` row shape."""
    schema = store_schema(ckpt, request.operator, DEFAULT_STORE)
    cf = next(
        (cf for cf in (schema.column_families if schema else []) if cf.name == request.family),
        None,
    )
    path = f"state/{request.operator}"
    if cf is None:
        raise CkptError(f"{path}: the schema file has no column family {request.family}")
    multi = request.family.endswith(MULTI_VALUED_SUFFIXES)
    kind = "joinSide" if request.join_side else "values" if multi else "value"
    return family_reader(ckpt, cf, kind, multi_valued=multi, path=path)
