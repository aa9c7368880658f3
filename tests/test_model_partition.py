"""``Partition.snapshot_versions`` and ``Partition.unique_ids``: derived once per partition
from its files (``versions`` reports them as they are), equal on every fixture to what each
``StoreVersion`` says of itself."""

from __future__ import annotations

import pytest

from ckpt_cli.core.model import Checkpoint
from ckpt_cli.versions import describe_versions
from tests.conftest import CASES, Case

pytestmark = pytest.mark.skipif(not CASES, reason="no fixtures")


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_partition_versions_agree_with_each_version(case: Case) -> None:
    ckpt = Checkpoint.open(str(case.checkpoint))
    assert ckpt.operators is not None  # built here: versions' tolerant view shares it
    report = describe_versions(ckpt)
    reported = {
        (op.id, store.name, part.id): part
        for op in report.operators
        for store in op.stores
        for part in store.partitions
    }
    for op in ckpt.operators.values():
        for store in op.stores.values():
            for part in store.partitions.values():
                snapshots = [v for v, sv in part.versions.items() if sv.is_snapshot]
                ids = {v: sv.unique_ids for v, sv in part.versions.items() if sv.unique_ids}
                assert part.snapshot_versions == snapshots
                assert part.unique_ids == ids
                # Derived once, and the report holds the model's own.
                assert part.snapshot_versions is part.snapshot_versions
                shown = reported[(op.id, store.name, part.id)]
                assert shown.snapshot_versions is part.snapshot_versions
                assert shown.unique_ids == {str(v): i for v, i in ids.items()}
