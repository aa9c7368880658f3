"""``ckpt repartition`` on copies of real Spark checkpoints (no Spark needed): the state after
the repartition batch is the state before, each record in the partition Spark's shuffle gives
it; the logs and metadata are what Spark writes; validate is clean; --undo gives back every
byte; and every refusal is one line, exit 2."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli import Checkpoint
from ckpt_cli.change.flow import Guards
from ckpt_cli.core.read import iter_state, read_zip_metadata
from ckpt_cli.core.rebuild import plan_version
from ckpt_cli.core.unfinished import find_unfinished_repartition
from ckpt_cli.repartition.placement import placer
from ckpt_cli.repartition.plan import RepartitionRefused, plan_repartition
from ckpt_cli.repartition.run import run_repartition
from ckpt_cli.replay import read_state
from ckpt_cli.state.reader import covering_reads
from ckpt_cli.storage import Storage
from tests.conftest import REPO, errors_but_home, run_cli
from tests.fixture_copies import (
    age_everything,
    in_memory_store,
    memory_objects,
    plan_latest_batch,
    truncate_latest_delta,
)
from tests.kill_support import tree

FIXTURES = REPO / "fixtures"


def fixture(name: str) -> Path:
    path = FIXTURES / "checkpoints" / name / "checkpoint"
    assert path.is_dir(), f"no fixture {name}"
    return path


def copy(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / "work" / name
    shutil.copytree(fixture(name), dest)
    age_everything(dest)
    return dest


def open_ckpt(path: Path) -> Checkpoint:
    return Checkpoint.open(Storage.from_url(str(path)))


def state_rows(path: Path, batch: int) -> Counter[str]:
    """Every row of every operator's state after ``batch`` (all families), partition left out."""
    ckpt = open_ckpt(path)
    rows: Counter[str] = Counter()
    for op in ckpt.operators:
        reads = covering_reads(ckpt, op)
        if reads == [{}]:  # one read per store (joins in state formats 1-2 have four)
            reads = [{"store": store} for store in ckpt.operators[op].stores]
        for read in reads:
            for row in read_state(ckpt, batch=batch, operator=op, **read):
                body = {k: v for k, v in row.items() if k != "partition_id"}
                rows[json.dumps([op, read, body], sort_keys=True, default=str)] += 1
    return rows


def assert_placed(path: Path, partitions: int) -> int:
    """Every raw record of the new version is in the partition the shuffle sends it to."""
    ckpt = open_ckpt(path)
    version = ckpt.batches.latest_committed + 1  # type: ignore[operator]
    checked = 0
    for op in ckpt.operators.values():
        for store in op.stores.values():
            plans = [
                plan_version(ckpt, op.id, p, version, store=store.name) for p in range(partitions)
            ]
            base = next((pl.base for pl in plans if pl.base is not None), None)
            meta = (
                read_zip_metadata(ckpt.storage, base.path, base.entry.size)
                if base is not None and base.path.endswith(".zip")
                else None
            )
            place = placer(ckpt, op.id, store.name, partitions, meta)
            for p, pl in enumerate(plans):
                assert pl.base is not None and not pl.steps, "a full snapshot, nothing else"
                keys = [key for key, _ in iter_state(ckpt, pl, checksummed=True)]
                assert set(place(keys).tolist()) <= {p}
                checked += len(keys)
    return checked


CASES = [
    "spark4-hdfs-agg",
    "spark4-hdfs-agg-zstd",
    "spark4-rocksdb-agg",
    "spark4-rocksdb-changelog",
    "spark4-rocksdb-v2",
    "spark4-join",
    "spark4-dedup",
    "spark4-tws-row",
    "spark4-join-v3-rocksdb",
    "spark4-session-rocksdb",
]


@pytest.mark.parametrize(
    ("name", "partitions"),
    [(c, m) for c in CASES for m in (1, 3)] + [("spark4-hdfs-agg", 5), ("spark4-rocksdb-v2", 5)],
)
def test_repartition_keeps_every_row_in_its_new_partition(
    name: str, partitions: int, tmp_path: Path
) -> None:
    path = copy(name, tmp_path)
    before_tree = tree(path)
    ckpt = open_ckpt(path)
    last = ckpt.batches.latest_committed
    assert last is not None
    before = state_rows(path, last)

    args = ("--partitions", str(partitions), "--apply", "-y", "--json")
    result = run_cli("repartition", str(path), *args)
    doc = result.json()
    # Exit 1 on a copy that names another home (as before the repartition): nothing else.
    assert result.exit_code == (0 if doc["result"]["validation"]["ok"] else 1), result.stderr
    assert doc["applied"] and doc["batch"] == last + 1 and doc["version"] == last + 2
    assert errors_but_home(doc["result"]["validation"]) == []
    assert sum(sum(s["keys_after"]) for s in doc["stores"]) == sum(
        sum(s["keys_before"]) for s in doc["stores"]
    )

    after = open_ckpt(path)
    assert after.batches.latest_committed == last + 1
    assert state_rows(path, last + 1) == before
    assert assert_placed(path, partitions) == sum(sum(s["keys_after"]) for s in doc["stores"])
    # The logs: offsets/N+1 is offsets/N with only the partition count changed.
    old = (path / "offsets" / str(last)).read_text()
    new = (path / "offsets" / str(last + 1)).read_text()
    assert after.offsets(last + 1).shuffle_partitions == partitions
    assert (
        new.replace(
            f'"spark.sql.shuffle.partitions":"{partitions}"', '"spark.sql.shuffle.partitions":"2"'
        )
        == old
    )
    if after.commit(last).state_unique_ids is None:
        assert (path / "commits" / str(last + 1)).read_bytes() == (
            path / "commits" / str(last)
        ).read_bytes()
    else:
        ids = after.commit(last + 1).state_unique_ids
        assert ids is not None and all(len(rows) == partitions for rows in ids.values())
    for op in after.operators.values():
        meta = after.operator_metadata(op.id)
        if meta is not None and meta.version == 1:
            assert {n for _, _, n in meta.stores} == {partitions}
    validation = run_cli("validate", str(path), "--json")
    assert errors_but_home(validation.json()) == [], validation.stdout

    undone = run_cli("repartition", str(path), "--undo")
    assert undone.exit_code == 0, undone.stderr
    assert tree(path) == before_tree


def test_dry_run_prints_the_plan_and_changes_nothing(tmp_path: Path) -> None:
    path = copy("spark4-hdfs-agg", tmp_path)
    before = tree(path)
    result = run_cli("repartition", str(path), "--partitions", "3")
    assert result.exit_code == 0, result.stderr
    assert "2 -> 3 partitions" in result.stdout and "Dry run" in result.stdout
    assert "state/0/2/11.snapshot" in result.stdout
    doc = run_cli("repartition", str(path), "--partitions", "3", "--json").json()
    assert doc["applied"] is False and doc["from_partitions"] == 2 and doc["partitions"] == 3
    (store,) = doc["stores"]
    assert sum(store["keys_before"]) == sum(store["keys_after"]) == 7
    assert store["skew_before"] is not None and store["files_to_write"][2].endswith("11.snapshot")
    assert doc["log_files"] == ["offsets/10", "state/0/_metadata/metadata", "commits/10"]
    assert tree(path) == before


def test_library_api(tmp_path: Path) -> None:
    path = copy("spark4-rocksdb-agg", tmp_path)
    ckpt = open_ckpt(path)
    plan = ckpt.plan_repartition(partitions=3)
    assert plan.batch == 10 and plan.stores[0].keys_after == [1, 4, 2]
    result = ckpt.repartition(partitions=3)
    assert result.validation.ok and Path(result.manifest).is_file()
    assert open_ckpt(path).batches.latest_committed == 10


def refusal(*args: str) -> str:
    result = run_cli("repartition", *args)
    assert result.exit_code == 2, result.stdout
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in result.stderr
    return lines[0]


def test_refusals(tmp_path: Path) -> None:
    path = copy("spark4-hdfs-agg", tmp_path)
    assert "already has 2 partitions" in refusal(str(path), "--partitions", "2")
    assert "must be >= 1" in refusal(str(path), "--partitions", "0")
    assert "--partitions" in refusal(str(path))
    assert "no repartition to undo" in refusal(str(path), "--undo")
    crashed = copy("spark4-crash-hdfs", tmp_path)
    assert "is not committed" in refusal(str(crashed), "--partitions", "3")
    # A query that planned a batch a minute ago looks active: --apply refuses unless --force.
    active = tmp_path / "active"
    shutil.copytree(fixture("spark4-hdfs-agg"), active)
    plan_latest_batch(active, 60)
    assert "looks active" in refusal(str(active), "--partitions", "3", "--apply", "-y")
    # --min-age 0 would switch that check off: as in cleanup and repair, it needs --force.
    assert "below the default" in refusal(
        str(active), "--partitions", "3", "--apply", "-y", "--min-age", "0"
    )
    assert (
        run_cli(
            "repartition", str(active), "--partitions", "3", "--apply", "-y", "--force"
        ).exit_code
        == 0
    )


def test_unreadable_state_is_refused(tmp_path: Path) -> None:
    path = copy("spark4-hdfs-agg", tmp_path)
    truncate_latest_delta(path)
    message = refusal(str(path), "--partitions", "3")
    assert "cannot be read completely" in message and "state/0/0" in message
    with pytest.raises(RepartitionRefused):
        plan_repartition(open_ckpt(path), partitions=3)


def test_unsupported_operator_is_refused(tmp_path: Path) -> None:
    path = copy("spark4-hdfs-agg", tmp_path)
    meta = path / "state/0/_metadata/metadata"
    meta.write_text(meta.read_text().replace("stateStoreSave", "someFutureExec"))
    (path / "state/0/_metadata/.metadata.crc").unlink()
    assert "someFutureExec" in refusal(str(path), "--partitions", "3")


def test_an_unfinished_repartition_is_finished_by_the_same_count(tmp_path: Path) -> None:
    path = copy("spark4-rocksdb-agg", tmp_path)
    before = state_rows(path, 9)
    assert run_cli("repartition", str(path), "--partitions", "3", "--apply", "-y").exit_code == 0
    # As if killed before the commit (Spark's own failed attempts look the same).
    (path / "commits" / "10").unlink()
    (path / "commits" / ".10.crc").unlink()
    unfinished = find_unfinished_repartition(open_ckpt(path))
    assert unfinished is not None and (unfinished.from_partitions, unfinished.to_partitions) == (
        2,
        3,
    )
    message = refusal(str(path), "--partitions", "4")
    assert "changes spark.sql.shuffle.partitions from 2 to 3" in message
    # ckpt wrote offsets/10 a moment ago: the query looks active until --force.
    finished = run_cli(
        "repartition", str(path), "--partitions", "3", "--apply", "-y", "--json", "--force"
    )
    assert finished.exit_code == 0, finished.stderr
    doc = finished.json()
    assert doc["finishing"]["batch"] == 10 and doc["result"]["rewritten"]
    assert find_unfinished_repartition(open_ckpt(path)) is None
    assert state_rows(path, 10) == before
    assert run_cli("validate", str(path)).exit_code == 0


def test_cleanup_removes_left_over_partitions_once_unneeded(tmp_path: Path) -> None:
    path = copy("spark4-hdfs-agg", tmp_path)
    applied = run_cli("repartition", str(path), "--partitions", "1", "--apply", "-y")
    text = " ".join(applied.stdout.split())
    assert applied.exit_code == 0 and "Left over" in text and "ckpt cleanup" in text
    age_everything(path)
    plan = run_cli("orphans", str(path), "--json", "--retain", "1").json()
    assert "OLD_PARTITION" not in plan["by_class"]  # batch 9 (2 partitions) is retained
    assert any("beyond the query's 1 partitions" in s["reason"] for s in plan["skipped"])
    # One more batch on the new layout: batch 9 falls out of a retention of 1.
    for log in ("offsets", "commits"):
        (path / log / "11").write_bytes((path / log / "10").read_bytes())
    (path / "state/0/0/12.snapshot").write_bytes((path / "state/0/0/11.snapshot").read_bytes())
    age_everything(path)
    plan = run_cli("orphans", str(path), "--json", "--retain", "1").json()
    removable = {d["path"] for d in plan["deletions"] if d["class"] == "OLD_PARTITION"}
    assert removable and all(p.startswith("state/0/1/") for p in removable)
    assert run_cli("cleanup", str(path), "--retain", "1", "--apply", "-y").exit_code == 0
    assert not list((path / "state/0/1").rglob("*.delta"))
    assert run_cli("validate", str(path)).exit_code == 0


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def test_manifest_records_every_change_before_it_is_made(tmp_path: Path) -> None:
    path = copy("spark4-hdfs-agg", tmp_path)
    run = run_repartition(Storage.from_url(str(path)), Guards(apply=True), partitions=3)
    assert run.result is not None
    body = _json(Path(run.result.manifest))
    assert body["complete"] and all(c["done"] for c in body["changes"])
    created = [c["path"] for c in body["changes"] if c["change"] == "created"]
    # Spark's order: the offsets entry first, the commit last.
    assert created[0] == "offsets/10" and created[-2:] == ["commits/10", "commits/.10.crc"]
    assert {c["path"] for c in body["changes"] if c["change"] == "rewritten"} == {
        "state/0/_metadata/metadata",
        "state/0/_metadata/.metadata.crc",
    }


# -- Spark's own repartition (fixtures/repartition: its files and its reader's rows) ------------

ORACLES = sorted(
    p for p in (FIXTURES / "repartition").glob("*-to*") if (p / "expected.json").is_file()
)


def _read_options(options: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"operator": int(options["operatorId"])}
    if "stateVarName" in options:
        out["state_var"] = options["stateVarName"]
    if options.get("readRegisteredTimers") == "true":
        out["timers"] = True
    if "storeName" in options:
        out["store"] = options["storeName"]
    return out


def _rows(lines: Any) -> Counter[str]:
    return Counter(json.dumps(row, sort_keys=True) for row in lines)


@pytest.mark.parametrize("oracle", ORACLES, ids=[p.name for p in ORACLES])
def test_same_logs_and_rows_as_sparks_own_repartition(oracle: Path, tmp_path: Path) -> None:
    """RocksDB: Spark's own repartition's files and its reader's rows of them. HDFS-backed
    stores (which Spark refuses): the rows Spark SQL's ``pmod(hash(key), M)`` places."""
    expected = json.loads((oracle / "expected.json").read_text())
    path = copy(expected["source_case"], tmp_path)
    m = expected["num_partitions"]
    result = run_cli("repartition", str(path), "--partitions", str(m), "--apply", "-y", "--json")
    assert result.exit_code in (0, 1), result.stderr
    assert errors_but_home(result.json()["result"]["validation"]) == []
    batch = result.json()["batch"]
    if "log_files" in expected:
        _same_files_as_spark(path, expected, batch, result.json())
    ckpt = open_ckpt(path)
    for read in expected["reads"]:
        lines = (oracle / "state" / f"{read['file']}.jsonl").read_text().splitlines()
        spark = _rows(json.loads(line) for line in lines)
        ours = _rows(read_state(ckpt, batch=batch, **_read_options(read["reader_options"])))
        assert ours == spark, read["file"]


def _shape(name: str) -> str:
    return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "U", name)


def _same_files_as_spark(path: Path, expected: Any, batch: int, doc: Any) -> None:
    assert batch == expected["new_batch"]
    # offsets/N+1 byte for byte; commits/N+1 too unless it names format v2's new files.
    assert (path / "offsets" / str(batch)).read_text() == expected["log_files"][f"offsets/{batch}"]
    commit = (path / "commits" / str(batch)).read_text()
    if "stateUniqueIds" not in commit:
        assert commit == expected["log_files"][f"commits/{batch}"]
    for name, text in expected["operator_metadata"].items():
        assert (path / name).read_text() == text  # a new _metadata/v2/<N+1>, as Spark's
    # The same files, but for the random parts of their names.
    written = {_shape(w["path"]) for w in doc["result"]["written"]}
    spark_added = {_shape(p) for p in expected["added_files"]}
    assert spark_added <= written, spark_added - written


def test_object_store_repartition_and_undo() -> None:
    """On an object store (memory://): whole-object puts, no Hadoop .crc, the manifest beside
    the checkpoint's prefix, and --undo restores every object."""
    with in_memory_store(fixture("spark4-rocksdb-v2"), "repartition-test") as (fs, before):
        storage = Storage.from_url("memory://repartition-test")
        run = run_repartition(storage, Guards(apply=True, force=True), partitions=3)
        assert run.result is not None and run.result.validation.ok
        assert not any(Path(p).name.startswith(".") for p in run.result.written)
        assert fs.exists(run.result.manifest)
        assert run_cli("repartition", "memory://repartition-test", "--undo").exit_code == 0
        assert memory_objects(fs, "repartition-test") == before


def test_undo_refuses_once_the_query_ran_on(tmp_path: Path) -> None:
    path = copy("spark4-hdfs-agg", tmp_path)
    before = tree(path)
    assert run_cli("repartition", str(path), "--partitions", "3", "--apply", "-y").exit_code == 0
    (path / "offsets" / "11").write_bytes((path / "offsets" / "10").read_bytes())
    assert "ran batch 11 after the repartition" in refusal(str(path), "--undo")
    (path / "offsets" / "11").unlink()
    assert run_cli("repartition", str(path), "--undo").exit_code == 0
    assert tree(path) == before
    again = run_cli("repartition", str(path), "--undo", "--json")  # undone already: said so
    assert again.exit_code == 0 and again.json()["already_undone"], again.stdout
    assert tree(path) == before


def test_a_quarantine_of_ones_own(tmp_path: Path) -> None:
    path = copy("spark4-rocksdb-changelog", tmp_path)
    before = tree(path)
    where = tmp_path / "elsewhere"
    args = ("--partitions", "1", "--quarantine", str(where))
    assert run_cli("repartition", str(path), *args, "--apply", "-y").exit_code == 0
    assert (where / "manifest.json").is_file()
    assert "no repartition to undo" in refusal(str(path), "--undo")
    # The old spelling of where to undo from names the new one.
    old = refusal(str(path), "--undo", "--quarantine", str(where))
    assert f"did you mean --undo --manifest {where}/manifest.json" in old
    manifest = str(where / "manifest.json")
    assert run_cli("repartition", str(path), "--undo", "--manifest", manifest).exit_code == 0
    assert tree(path) == before
