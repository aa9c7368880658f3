"""formats/tws.py against the operator metadata v2 files, schema files and zips of the
Spark 4.3 fixtures, and Spark's own ``state-metadata`` rows saved beside them."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckpt_cli.errors import FormatError
from ckpt_cli.formats import rocksdb_zip
from ckpt_cli.formats.state_schema import parse_state_schema
from ckpt_cli.formats.tws import (
    FamilyRole,
    families_of_variable,
    family_role,
    parse_operator_metadata_v2,
    schema_file_in_operator_dir,
)
from tests.conftest import CASES_DIR

V2_CASES = sorted(
    p.parent.parent.parent.parent.parent.name
    for p in CASES_DIR.glob("*/checkpoint/state/*/_metadata/v2")
)


def expected(case: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((CASES_DIR / case / "expected.json").read_text())
    return result


def test_the_fixtures_have_v2_metadata() -> None:
    assert {"spark4-tws-pandas", "spark4-tws-row", "spark4-join-v3-rocksdb"} <= set(V2_CASES)


@pytest.mark.parametrize("case", V2_CASES)
def test_operator_metadata_v2_equals_sparks_state_metadata(case: str) -> None:
    op_dir = CASES_DIR / case / "checkpoint/state/0"
    files = sorted((op_dir / "_metadata/v2").glob("[0-9]*"), key=lambda p: int(p.name))
    newest = parse_operator_metadata_v2(files[-1].name, files[-1].read_bytes())
    spark = expected(case)["state_metadata"]
    assert [newest.operator_name] * len(spark) == [r["operatorName"] for r in spark]
    assert [s.name for s in newest.stores] == [r["stateStoreName"] for r in spark]
    assert [s.num_partitions for s in newest.stores] == [r["numPartitions"] for r in spark]
    assert newest.properties_json == spark[0]["operatorProperties"]
    ops = expected(case)["operators"][0]
    if "state_vars" in ops:
        ours = sorted((v.name, v.short_kind, v.ttl_enabled) for v in newest.user_state_variables)
        assert ours == sorted((v["name"], v["kind"], v["ttl"]) for v in ops["state_vars"])
        timers = [v for v in newest.state_variables if v.kind == "TimerState"]
        assert [family_role(t.name).time_domain for t in timers] == (
            [ops["timers"]] if ops["timers"] else []
        )
        assert newest.time_mode in ("ProcessingTime", "EventTime", "NoTime")
    else:
        assert newest.properties == {"useVirtualColumnFamilies": True}
    for metadata_file in files:
        meta = parse_operator_metadata_v2(metadata_file.name, metadata_file.read_bytes())
        for store in meta.stores:
            assert store.schema_file_paths
            for url in store.schema_file_paths:
                # Absolute paths of where Spark ran: the fixture is a moved checkpoint.
                assert str(op_dir) not in url
                rel = schema_file_in_operator_dir(url)
                assert rel.startswith(f"_stateSchema/{store.name}/")
                assert (op_dir / rel).is_file()


@pytest.mark.parametrize("case", [c for c in V2_CASES if "tws" in c])
def test_families_of_the_variables_are_the_zips_families(case: str) -> None:
    """Each zip holds the families of the variables its batch's operator metadata declares
    (the newest ``_metadata/v2/<b>`` with b at or below the batch: a query whose variables
    changed at a restart has other families before it)."""
    op_dir = CASES_DIR / case / "checkpoint/state/0"
    files = sorted((op_dir / "_metadata/v2").glob("[0-9]*"), key=lambda p: int(p.name))
    eras = [(int(f.name), parse_operator_metadata_v2(f.name, f.read_bytes())) for f in files]
    checked = 0
    for part in op_dir.iterdir():
        for zip_path in part.glob("*.zip"):
            # A zip of version v (`<v>.zip`, `<v>_<uuid>.zip`) is batch v-1's.
            batch = int(zip_path.name.split(".")[0].split("_")[0]) - 1
            meta = [m for b, m in eras if b <= batch][-1]
            want = {"default"}
            for variable in meta.state_variables:
                want |= set(families_of_variable(variable))
            schema_file = op_dir / schema_file_in_operator_dir(meta.stores[0].schema_file_paths[-1])
            in_schema = {
                cf.name for cf in parse_state_schema("s", schema_file.read_bytes()).column_families
            }
            # The schema file may list families the store never creates ($rowCounter_ of a
            # TTL list).
            assert want - {"default"} <= in_schema
            mapping = rocksdb_zip.read_zip(zip_path.name, zip_path.read_bytes()).metadata
            # deleteIfExists leaves a dropped TTL variable's TTL index (spark4-tws-ttl-evolve).
            dropped = {
                f"$ttl_{v.name}"
                for b, m in eras
                if b <= batch
                for v in m.user_state_variables
                if v.ttl_enabled and v not in meta.state_variables
            }
            extra = set(mapping.column_family_mapping) - want
            assert want <= set(mapping.column_family_mapping) and extra <= dropped, zip_path
            for name in mapping.column_family_mapping:
                role = family_role(name)
                internal = mapping.column_family_type_map.get(name)
                if name != "default":
                    assert role.internal == bool(internal), name
            checked += 1
    assert checked


def test_family_roles() -> None:
    assert family_role("cnt") == FamilyRole("variable", "cnt")
    assert family_role("$ttl_cnt") == FamilyRole("ttl_index", "cnt")
    assert family_role("$min_seen") == FamilyRole("list_min_expiry", "seen")
    assert family_role("$count_seen") == FamilyRole("list_count", "seen")
    assert family_role("$rowCounter_events") == FamilyRole("row_counter", "events")
    assert family_role("$procTimers_keyToTimestamp") == FamilyRole("timers", None, "processing")
    assert family_role("$eventTimers_timestampToKey") == FamilyRole("timers_index", None, "event")
    assert family_role("default").role == "default"


def test_schema_paths_outside_state_schema_are_refused() -> None:
    with pytest.raises(FormatError):
        schema_file_in_operator_dir("file:/tmp/x/state/0/other/default/0_u")
    with pytest.raises(FormatError):
        schema_file_in_operator_dir("file:/tmp/x/_stateSchema/../0_u")
    assert (
        schema_file_in_operator_dir("s3a://b/ck/state/3/_stateSchema/default/4_abc")
        == "_stateSchema/default/4_abc"
    )


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_random_metadata_gives_a_value_or_a_format_error(data: bytes) -> None:
    with contextlib.suppress(FormatError):
        parse_operator_metadata_v2("m", b"v2\n" + data)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_random_properties_give_a_value_or_a_format_error(text: str) -> None:
    body = {
        "operatorInfo": {"operatorId": 0, "operatorName": "x"},
        "stateStoreInfo": [{"storeName": "default", "numColsPrefixKey": 0, "numPartitions": 1}],
        "operatorPropertiesJson": text,
    }
    try:
        meta = parse_operator_metadata_v2("m", ("v2\n" + json.dumps(body)).encode())
    except FormatError:
        return
    assert isinstance(meta.state_variables, tuple)
