"""State over time: the operator metadata and state schema files in force at each batch.

A transformWithState query may change its state between restarts (docs/state-formats.md
§19): Spark writes a new ``state/<op>/_metadata/v2/<batchId>`` at the first batch of every
run, and a new ``_stateSchema/<store>/<batchId>_<uuid>`` when a schema changed. Spark's
``statestore`` reader reads batch ``b`` with the newest metadata file at or below ``b``
(``OperatorStateMetadataV2Reader.read``; a change feed with that of its end batch): its
``stateVariables`` say which variables exist, the last of its ``stateSchemaFilePaths`` is the
schema rows come out in, and every file it names gives the schema a value's stored schema id
was written with (``StateSchemaMetadata``, Avro encoding).

``operator_history`` reads and caches this per operator; nothing here decodes rows. Operators
without metadata v2 have one era, their newest schema file (``read.store_schema``).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from ckpt_cli.core.model import Checkpoint
from ckpt_cli.errors import CkptError
from ckpt_cli.formats.spark_types import StructType
from ckpt_cli.formats.state_schema import ColumnFamilySchema, StateSchema, parse_state_schema
from ckpt_cli.formats.tws import (
    OperatorMetadataV2,
    StateVariable,
    parse_operator_metadata_v2,
    schema_file_in_operator_dir,
)


@dataclass(frozen=True)
class StoreSchemas:
    """The schema files a store is read with at a batch: ``active`` (the last file the
    operator metadata names: the schema rows come out in) and every file it names, oldest
    first, whose ids decode values written under an older schema."""

    path: str
    active: StateSchema
    files: tuple[tuple[str, StateSchema], ...]

    def family(self, name: str) -> ColumnFamilySchema | None:
        return self.active.column_family(name)

    def with_earlier_families(self) -> StateSchema:
        """``active`` with the families of the earlier files that it no longer lists: a
        store keeps some (``deleteIfExists`` drops a variable's family, not its TTL index)."""
        names = {cf.name for cf in self.active.column_families}
        extra = []
        for _path, schema in reversed(self.files[:-1]):
            for cf in schema.column_families:
                if cf.name not in names:
                    names.add(cf.name)
                    extra.append(cf)
        return replace(self.active, column_families=self.active.column_families + tuple(extra))

    def value_writers(self, name: str) -> dict[int, StructType]:
        """Value schema id -> the value schema written under it, for family ``name``."""
        return self._writers(name, key=False)

    def key_writers(self, name: str) -> dict[int, StructType]:
        return self._writers(name, key=True)

    def _writers(self, name: str, *, key: bool) -> dict[int, StructType]:
        out: dict[int, StructType] = {}
        for _path, schema in self.files:
            cf = schema.column_family(name)
            if cf is not None:
                out[cf.key_schema_id if key else cf.value_schema_id] = cf.key if key else cf.value
        return out


@dataclass(frozen=True)
class MetadataEra:
    """One ``_metadata/v2/<batch>`` file: in force from ``batch`` (the first batch of a run)
    until the next file's batch."""

    batch: int
    path: str
    metadata: OperatorMetadataV2
    # Store name -> the checkpoint paths of its stateSchemaFilePaths, in order.
    schema_paths: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def variables(self) -> tuple[StateVariable, ...]:
        return self.metadata.user_state_variables

    def variable(self, name: str) -> StateVariable | None:
        return next((v for v in self.metadata.state_variables if v.name == name), None)


class OperatorHistory:
    """The metadata eras of one operator (empty: the operator has no metadata v2)."""

    def __init__(self, ckpt: Checkpoint, operator: int, eras: list[MetadataEra]) -> None:
        self._ckpt = ckpt
        self.operator = operator
        self.eras = eras
        self._schemas: dict[tuple[int, str], StoreSchemas | None] = {}

    @property
    def newest(self) -> MetadataEra | None:
        return self.eras[-1] if self.eras else None

    def era_at(self, batch: int | None) -> MetadataEra | None:
        """The metadata Spark reads batch ``batch`` with: the newest file at or below it
        (``None`` batch: the newest). Below the oldest file (Spark fails there: its files
        were purged), the oldest."""
        if not self.eras:
            return None
        if batch is None:
            return self.eras[-1]
        at = [e for e in self.eras if e.batch <= batch]
        return at[-1] if at else self.eras[0]

    def era_after(self, era: MetadataEra) -> MetadataEra | None:
        later = [e for e in self.eras if e.batch > era.batch]
        return later[0] if later else None

    def schemas(self, era: MetadataEra, store: str) -> StoreSchemas | None:
        """The schema files ``era`` names for ``store``, parsed (cached)."""
        key = (era.batch, store)
        if key not in self._schemas:
            self._schemas[key] = self._read_schemas(era, store)
        return self._schemas[key]

    def _read_schemas(self, era: MetadataEra, store: str) -> StoreSchemas | None:
        paths = era.schema_paths.get(store, ())
        files = []
        for path in paths:
            if self._ckpt.file(path) is None:
                raise CkptError(f"{path}: state schema file named by {era.path} is missing")
            files.append((path, parse_state_schema(path, self._ckpt.storage.read_bytes(path))))
        if not files:
            return None
        return StoreSchemas(files[-1][0], files[-1][1], tuple(files))

    def batches_with(self, name: str, batches: Iterable[int]) -> list[int]:
        """Which of ``batches`` read a metadata that declares variable ``name``."""
        out = []
        for b in batches:
            era = self.era_at(b)
            if era is not None and era.variable(name) is not None:
                out.append(b)
        return out


_HISTORIES: weakref.WeakKeyDictionary[Checkpoint, dict[int, OperatorHistory]] = (
    weakref.WeakKeyDictionary()
)


def operator_history(ckpt: Checkpoint, operator: int) -> OperatorHistory:
    """The metadata eras of ``operator``, parsed once per checkpoint object."""
    per_ckpt = _HISTORIES.setdefault(ckpt, {})
    if operator not in per_ckpt:
        per_ckpt[operator] = OperatorHistory(ckpt, operator, _eras(ckpt, operator))
    return per_ckpt[operator]


def _eras(ckpt: Checkpoint, operator: int) -> list[MetadataEra]:
    op = ckpt.operators.get(operator)
    if op is None:
        return []
    eras = []
    for batch, f in sorted(op.metadata_v2_files.items()):
        meta = parse_operator_metadata_v2(f.path, ckpt.storage.read_bytes(f.path))
        paths = {
            store.name: tuple(
                f"{op.path}/{schema_file_in_operator_dir(url, path=f.path)}"
                for url in store.schema_file_paths
            )
            for store in meta.stores
        }
        eras.append(MetadataEra(batch, f.path, meta, paths))
    return eras


def describe_batches(batches: list[int]) -> str:
    """``0-2, 5`` for [0, 1, 2, 5]."""
    runs: list[list[int]] = []
    for b in sorted(batches):
        if runs and b == runs[-1][-1] + 1:
            runs[-1].append(b)
        else:
            runs.append([b])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
