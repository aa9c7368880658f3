"""The oracle tier for a broken format-v2 lineage: Spark's statestore source fails and
succeeds where ckpt replay does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CASES
from tests.lineage_damage import BOGUS_ID
from tests.spark_support import spark  # noqa: F401 - the session fixture
from tests.test_lineage import V2, break_latest_lineage, copy, latest_commit, rows

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not CASES, reason="no fixtures")]

FORMAT_V2 = "spark.sql.streaming.stateStore.checkpointFormatVersion"


def _keys(found: list[Any]) -> list[str]:
    return sorted(json.dumps([r["partition_id"], r["key"]], sort_keys=True) for r in found)


def test_spark_and_ckpt_agree_on_a_broken_lineage(
    spark: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    root = copy(V2, tmp_path)
    _, version, _ = break_latest_lineage(root)
    end = latest_commit(root)
    previous = spark.conf.get(FORMAT_V2, None)
    # Reading a v2 checkpoint by batch id needs the session to say so.
    spark.conf.set(FORMAT_V2, "2")
    try:

        def read(**options: str) -> list[dict[str, Any]]:
            df = spark.read.format("statestore").options(**options).load(str(root))
            return [r.asDict(recursive=True) for r in df.collect()]

        # The change feed through the broken link fails in Spark and in ckpt, naming it.
        with pytest.raises(Exception, match=f"{version}_{BOGUS_ID}.changelog does not exist"):
            read(readChangeFeed="true", changeStartBatchId=str(end - 1), changeEndBatchId=str(end))
        feed = ("--changes", "--from", str(end - 1), "--to", str(end))
        code, _, err = rows(str(root), *feed)
        assert code == 2 and f"{version}_{BOGUS_ID}.changelog" in err
        # Where Spark's path does not need it, both answer, with the same rows.
        spark_feed = read(
            readChangeFeed="true", changeStartBatchId=str(end), changeEndBatchId=str(end)
        )
        code, ours, _ = rows(str(root), "--changes", "--from", str(end), "--to", str(end))
        assert code == 0 and _keys(ours) == _keys(spark_feed)
        code, ours, _ = rows(str(root), "--batch", str(end))
        assert code == 0 and _keys(ours) == _keys(read(batchId=str(end)))
    finally:
        if previous is None:
            spark.conf.unset(FORMAT_V2)
        else:
            spark.conf.set(FORMAT_V2, previous)
