"""``unsaferow.project_fields`` against Spark's own rows: projecting every field of a row
Spark wrote gives back its bytes exactly, and cutting a row in two at any field and joining
the halves gives it back too, over the key and value rows of HDFS-backed fixtures (strings,
timestamps, nested window structs, arrays, flatMapGroupsWithState's state structs)."""

from __future__ import annotations

import pytest

from ckpt_cli.core.model import Checkpoint
from ckpt_cli.core.read import iter_state, store_schema
from ckpt_cli.core.rebuild import plan_version
from ckpt_cli.formats import spark_types as S
from ckpt_cli.formats.unsaferow import project_fields
from tests.conftest import CASES_DIR

pytestmark = pytest.mark.skipif(not CASES_DIR.is_dir(), reason="no fixtures")

FIXTURES = [
    "spark4-hdfs-agg",
    "spark4-session-hdfs",
    "spark4-fmgws-hdfs",
    "spark4-join",
    "spark4-dedup-ww-hdfs",
    "spark35-hdfs-agg",
]


def rows_of(name: str) -> list[tuple[bytes, S.StructType]]:
    ckpt = Checkpoint.open(str(CASES_DIR / name / "checkpoint"))
    last = ckpt.batches.latest_committed
    assert last is not None
    out = []
    for op in ckpt.operators.values():
        for store_name, store in op.stores.items():
            schema = store_schema(ckpt, op.id, store_name)
            assert schema is not None
            for part in store.partitions:
                plan = plan_version(ckpt, op.id, part, last + 1, store=store_name)
                for key, value in iter_state(ckpt, plan):
                    out += [(key, schema.key), (value[: len(value) & ~7], schema.value)]
    return out


@pytest.mark.parametrize("name", FIXTURES)
def test_projecting_a_spark_row_gives_its_bytes_back(name: str) -> None:
    rows = rows_of(name)
    assert rows
    for row, schema in rows:
        n = len(schema.fields)
        assert project_fields([(row, schema)], [(0, i) for i in range(n)]) == row
        for cut in range(1, n):
            head = project_fields([(row, schema)], [(0, i) for i in range(cut)])
            tail = project_fields([(row, schema)], [(0, i) for i in range(cut, n)])
            halves = [
                (head, S.StructType(schema.fields[:cut])),
                (tail, S.StructType(schema.fields[cut:])),
            ]
            picks = [(0, i) for i in range(cut)] + [(1, i) for i in range(n - cut)]
            assert project_fields(halves, picks) == row, (name, cut)
