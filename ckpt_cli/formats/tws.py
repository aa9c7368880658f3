"""transformWithState and other multi-family operators: operator metadata v2 in full, and
which RocksDB column family holds what (docs/state-formats.md §2, §6, §7).

``state/<op>/_metadata/v2/<batchId>`` (``OperatorStateMetadataV2``, OperatorStateMetadata.scala)
is a ``v2`` line then one JSON object: ``operatorInfo {operatorId, operatorName}``,
``stateStoreInfo [{storeName, numColsPrefixKey, numPartitions, stateSchemaFilePaths}]`` and
``operatorPropertiesJson``, a JSON *string*: for transformWithState ``{timeMode, outputMode,
stateVariables: [{stateName, stateVariableType, ttlEnabled}]}``, for join v3/v4
``{"useVirtualColumnFamilies": true}``.

``stateSchemaFilePaths`` are absolute URLs of the directory Spark ran in; a copied or moved
checkpoint must be read from its own ``state/<op>/_stateSchema/<store>/<file>``:
``schema_file_in_operator_dir`` gives that path.

Column families of a state variable ``v`` (``StateStoreColumnFamilySchemaUtils``,
``TTLState.scala``, ``TimerStateImpl.scala``): ``v`` itself; ``$ttl_v`` (TTL index, range scan
on the expiry; for a list one entry per key, at the ``$min_v`` expiry), ``$min_v`` and
``$count_v`` (list with TTL), ``$rowCounter_v`` (list without TTL); timers
``$procTimers_keyToTimestamp`` / ``$eventTimers_keyToTimestamp`` (prefix scan) and their
``..._timestampToKey`` indexes (range scan). ``default`` is created but holds no data.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ckpt_cli.errors import FormatError
from ckpt_cli.formats.logs import parse_operator_metadata

VALUE_STATE = "ValueState"
LIST_STATE = "ListState"
MAP_STATE = "MapState"
TIMER_STATE = "TimerState"
_SHORT_KINDS = {VALUE_STATE: "value", LIST_STATE: "list", MAP_STATE: "map", TIMER_STATE: "timer"}

PROC_TIMERS = "$procTimers"
EVENT_TIMERS = "$eventTimers"
KEY_TO_TIMESTAMP = "_keyToTimestamp"
TIMESTAMP_TO_KEY = "_timestampToKey"
DEFAULT_FAMILY = "default"

# Family name prefix -> role of an internal family of state variable <rest of the name>.
_INTERNAL_PREFIXES = (
    ("$ttl_", "ttl_index"),
    ("$min_", "list_min_expiry"),
    ("$count_", "list_count"),
    ("$rowCounter_", "row_counter"),
)


@dataclass(frozen=True)
class StateVariable:
    """One entry of ``stateVariables``; ``kind`` is Spark's ``stateVariableType``."""

    name: str
    kind: str
    ttl_enabled: bool

    @property
    def short_kind(self) -> str:
        """``value``, ``list``, ``map`` or ``timer`` (the kind's own name if unknown)."""
        return _SHORT_KINDS.get(self.kind, self.kind)


@dataclass(frozen=True)
class StoreInfoV2:
    name: str
    num_cols_prefix_key: int
    num_partitions: int
    schema_file_paths: tuple[str, ...]


@dataclass(frozen=True)
class OperatorMetadataV2:
    operator_id: int
    operator_name: str
    stores: tuple[StoreInfoV2, ...]
    # operatorPropertiesJson parsed ({} when absent or empty).
    properties: dict[str, Any] = field(default_factory=dict)
    # The operatorPropertiesJson string as written (None when absent).
    properties_json: str | None = None

    @property
    def time_mode(self) -> str | None:
        value = self.properties.get("timeMode")
        return value if isinstance(value, str) else None

    @property
    def output_mode(self) -> str | None:
        value = self.properties.get("outputMode")
        return value if isinstance(value, str) else None

    @property
    def state_variables(self) -> tuple[StateVariable, ...]:
        return _state_variables(self.properties)

    @property
    def user_state_variables(self) -> tuple[StateVariable, ...]:
        """The variables a user names (``stateVarName``): not the timer families."""
        return tuple(v for v in self.state_variables if v.kind != TIMER_STATE)


def _state_variables(props: dict[str, Any]) -> tuple[StateVariable, ...]:
    out = []
    for item in props.get("stateVariables") or ():
        if isinstance(item, dict) and isinstance(item.get("stateName"), str):
            out.append(
                StateVariable(
                    item["stateName"],
                    str(item.get("stateVariableType", "")),
                    item.get("ttlEnabled") is True,
                )
            )
    return tuple(out)


def parse_operator_metadata_v2(path: str, data: bytes) -> OperatorMetadataV2:
    """A ``_metadata/v2/<batchId>`` file in full (``logs.parse_operator_metadata`` checks the
    header and the common fields)."""
    base = parse_operator_metadata(path, data)
    if base.version != 2:
        raise FormatError(path, f"expected operator metadata v2, found v{base.version}", line=1)
    stores = []
    for index, store in enumerate(base.raw.get("stateStoreInfo") or ()):
        paths = store.get("stateSchemaFilePaths", [])
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise FormatError(
                path, f"stateStoreInfo[{index}].stateSchemaFilePaths must be strings", line=2
            )
        name, prefix_cols, partitions = base.stores[index]
        stores.append(StoreInfoV2(name, prefix_cols, partitions, tuple(paths)))
    text = base.raw.get("operatorPropertiesJson")
    props: dict[str, Any] = {}
    if text is not None:
        if not isinstance(text, str):
            raise FormatError(path, "operatorPropertiesJson must be a JSON string", line=2)
        if text.strip():
            try:
                parsed = json.loads(text)
            except (json.JSONDecodeError, RecursionError) as exc:
                raise FormatError(
                    path, f"operatorPropertiesJson is not JSON: {exc}", line=2
                ) from None
            if not isinstance(parsed, dict):
                raise FormatError(path, "operatorPropertiesJson must hold a JSON object", line=2)
            props = parsed
    return OperatorMetadataV2(
        base.operator_id,
        base.operator_name,
        tuple(stores),
        props,
        text if isinstance(text, str) else None,
    )


def schema_file_in_operator_dir(schema_file_path: str, *, path: str = "<metadata>") -> str:
    """Where a ``stateSchemaFilePaths`` entry lives inside this checkpoint, relative to
    ``state/<op>/``: ``_stateSchema/<store>/<file>`` (the last three segments of the URL)."""
    parts = [p for p in schema_file_path.replace("\\", "/").split("/") if p]
    if len(parts) < 3 or parts[-3] != "_stateSchema" or parts[-1] in (".", ".."):
        raise FormatError(
            path,
            f"state schema file path {schema_file_path!r} is not .../_stateSchema/<store>/<file>",
        )
    if parts[-2] in (".", ".."):
        raise FormatError(path, f"state schema file path {schema_file_path!r} has a bad store name")
    return "/".join(parts[-3:])


@dataclass(frozen=True)
class FamilyRole:
    """What a column family of a transformWithState store holds.

    ``role``: ``variable`` (a state variable's own family), ``ttl_index``,
    ``list_min_expiry``, ``list_count``, ``row_counter``, ``timers`` (``*_keyToTimestamp``),
    ``timers_index`` (``*_timestampToKey``), ``default``; ``variable`` names the state
    variable (None for timers and default); ``time_domain`` is ``processing``/``event`` for
    timer families.
    """

    role: str
    variable: str | None
    time_domain: str | None = None

    @property
    def internal(self) -> bool:
        return self.role != "variable"


def family_role(name: str) -> FamilyRole:
    """The role of a column family, from its name alone."""
    if name == DEFAULT_FAMILY:
        return FamilyRole("default", None)
    for timers, domain in ((PROC_TIMERS, "processing"), (EVENT_TIMERS, "event")):
        if name == timers + KEY_TO_TIMESTAMP:
            return FamilyRole("timers", None, domain)
        if name == timers + TIMESTAMP_TO_KEY:
            return FamilyRole("timers_index", None, domain)
    for prefix, role in _INTERNAL_PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            return FamilyRole(role, name[len(prefix) :])
    return FamilyRole("variable", name)


def families_of_variable(variable: StateVariable) -> tuple[str, ...]:
    """The families Spark creates for a state variable (timer variables: both timer
    families of their domain)."""
    name = variable.name
    if variable.kind == TIMER_STATE:
        stem = name[: -len(KEY_TO_TIMESTAMP)] if name.endswith(KEY_TO_TIMESTAMP) else name
        return (stem + KEY_TO_TIMESTAMP, stem + TIMESTAMP_TO_KEY)
    out = [name]
    if variable.ttl_enabled:
        out.append(f"$ttl_{name}")
        if variable.kind == LIST_STATE:
            out += [f"$min_{name}", f"$count_{name}"]
    elif variable.kind == LIST_STATE:
        out.append(f"$rowCounter_{name}")
    return tuple(out)


_HOME = re.compile(r"^(.*?)/state/\d+/_stateSchema/")


def schema_homes(meta: OperatorMetadataV2) -> set[str]:
    """The checkpoint locations (homes) the ``stateSchemaFilePaths`` of ``meta`` are under,
    as Spark recorded them (``file:/…/checkpoint``, ``s3a://bucket/…``)."""
    homes = set()
    for store in meta.stores:
        for url in store.schema_file_paths:
            match = _HOME.match(url)
            if match:
                homes.add(match[1])
    return homes


def same_location(a: str, b: str) -> bool:
    """Whether two locations name the same place, whatever the scheme spelling Spark and
    the user chose (``file:/x`` and ``/x``; ``s3a://b/k`` and ``s3://b/k``)."""
    return _location_key(a) == _location_key(b)


def _location_key(url: str) -> str:
    scheme, sep, rest = url.partition(":")
    if not sep or "/" in scheme:
        rest = url  # a plain path
    return rest.lstrip("/").rstrip("/")
