"""``ckpt convert --provider``/``--format-version`` on copies of real fixtures: the state
ckpt reads after the conversion is the state before it, store for store; validate is clean;
``--undo`` gives back every byte; a dry run changes nothing; what ckpt cannot convert is
refused in one line; and a conversion killed at any of its writes is undone to the original
bytes. (Spark's own reader and a restart of the real query judge the result in
``test_convert_spark.py``.)"""

from __future__ import annotations

import json
import random
import shutil
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest

import ckpt_cli
from ckpt_cli.change.flow import Guards
from ckpt_cli.convert.plan import ConvertRefused, plan_convert
from ckpt_cli.convert.run import run_convert, undo_convert
from ckpt_cli.core.model import Checkpoint, FileKind
from ckpt_cli.core.read import iter_state
from ckpt_cli.core.rebuild import plan_version
from tests.conftest import CASES_DIR, run_cli
from tests.fixture_copies import age_everything, latest, latest_offsets, plan_latest_batch
from tests.kill_support import die_in_nth_write, kill_mid_command, tree

STATE_KINDS = (FileKind.ZIP, FileKind.CHANGELOG, FileKind.DELTA, FileKind.SNAPSHOT)

pytestmark = pytest.mark.skipif(not CASES_DIR.is_dir(), reason="no fixtures")

CONVERTIBLE = [
    ("spark4-hdfs-agg", "rocksdb"),
    ("spark4-hdfs-agg-zstd", "rocksdb"),
    ("spark4-hdfs-agg-200", "rocksdb"),
    ("spark4-rocksdb-agg", "hdfs"),
    ("spark4-rocksdb-changelog", "hdfs"),
    ("spark4-dedup", "hdfs"),
    ("spark4-dedup-ww-hdfs", "rocksdb"),
    ("spark4-fmgws-hdfs", "rocksdb"),
    ("spark4-fmgws-rocksdb", "hdfs"),
    ("spark4-join", "rocksdb"),
    ("spark4-join-v2-rocksdb", "hdfs"),
    ("spark4-multi-op", "rocksdb"),
    ("spark4-multi-op-rocksdb", "hdfs"),
    ("spark35-hdfs-agg", "rocksdb"),
    ("spark4-session-hdfs", "rocksdb"),
    ("spark4-session-rocksdb", "hdfs"),
]


def copy(name: str, dest: Path) -> Path:
    shutil.copytree(CASES_DIR / name / "checkpoint", dest)
    age_everything(dest)
    return dest


def state_of(root: Path) -> dict[tuple[int, str], list[str]]:
    """Every store's rows at the latest committed batch, as ckpt reads them."""
    ckpt = ckpt_cli.open(str(root))
    return {
        (op.id, name): sorted(
            json.dumps(row, sort_keys=True, default=str)
            for row in ckpt.replay(operator=op.id, store=name)
        )
        for op in ckpt.operators.values()
        for name in op.stores
    }


@pytest.mark.parametrize(("name", "provider"), CONVERTIBLE)
def test_the_state_after_is_the_state_before(name: str, provider: str, tmp_path: Path) -> None:
    root = copy(name, tmp_path / "ckpt")
    original = tree(root)
    before = state_of(root)
    last = latest(root)
    run = run_convert(Checkpoint.open(str(root)).storage, Guards(apply=True), provider=provider)
    assert run.result is not None and run.result.validation.ok
    assert latest(root) == last + 1
    conf = json.loads(latest_offsets(root).read_text().splitlines()[1])["conf"]
    assert provider in conf["spark.sql.streaming.stateStore.providerClass"].lower()
    after = Checkpoint.open(str(root))
    assert {st.provider for op in after.operators.values() for st in op.stores.values()} == {
        provider
    }
    assert state_of(root) == before
    assert sum(len(rows) for rows in before.values()) == sum(s.keys for s in run.plan.stores)
    undone = undo_convert(after.storage)
    assert undone.restored == len(run.plan.moved)
    assert tree(root) == original


# (fixture, the change): each way between the RocksDB formats, with and without changelog
# checkpointing, a four-store join, a column-family join (format 3), session windows (keys
# scanned by prefix), a provider change into v2 and out of it, and a Spark 4.0 format-v2
# checkpoint whose zips have metadata v2.
FORMATS = [
    ("spark4-rocksdb-v2", ["--format-version", "1"]),
    ("spark4-rocksdb-changelog", ["--format-version", "2"]),
    ("spark4-rocksdb-agg", ["--format-version", "2"]),
    ("spark4-join-v2-rocksdb", ["--format-version", "2"]),
    ("spark4-join-v3-rocksdb", ["--format-version", "2"]),
    ("spark4-session-rocksdb", ["--format-version", "2"]),
    ("spark4-hdfs-agg", ["--provider", "rocksdb", "--format-version", "2"]),
    ("spark4-rocksdb-v2", ["--provider", "hdfs"]),
    ("spark40-rocksdb-v2", ["--format-version", "2"]),
    ("spark40-rocksdb-v2", ["--format-version", "1"]),
]


def records_at(root: Path, batch: int) -> dict[tuple[int, str, int], list[tuple[bytes, bytes]]]:
    """Every store partition's stored records at ``batch``, as ckpt rebuilds them."""
    ckpt = Checkpoint.open(str(root))
    return {
        (op.id, name, part): sorted(
            iter_state(ckpt, plan_version(ckpt, op.id, part, batch + 1, store=name))
        )
        for op in ckpt.operators.values()
        for name, store in op.stores.items()
        for part in store.partitions
    }


def zip_metadata_versions(root: Path) -> set[str]:
    return {
        zipfile.ZipFile(z).read("metadata").split(b"\n", 1)[0].decode()
        for z in root.glob("state/**/*.zip")
    }


@pytest.mark.parametrize(("name", "change"), FORMATS)
def test_a_format_conversion_keeps_the_state_and_names_its_files_as_the_format_does(
    name: str, change: list[str], tmp_path: Path
) -> None:
    root = copy(name, tmp_path / "ckpt")
    original = tree(root)
    last = latest(root)
    within = "--provider" not in change  # RocksDB to RocksDB: records move as they are
    before = records_at(root, last) if within else state_of(root)
    run = run_convert(Checkpoint.open(str(root)).storage, Guards(apply=True), **_kwargs(change))
    assert run.result is not None and run.result.validation.ok, run.result
    plan = run.plan
    assert plan.format_version == (2 if "2" in change else 1)
    assert (records_at(root, last + 1) if within else state_of(root)) == before
    head, _, body = (root / "commits" / str(last + 1)).read_text().partition("\n")
    assert head == f"v{plan.format_version}"
    ids = json.loads(body).get("stateUniqueIds")
    after = Checkpoint.open(str(root))
    assert after.checkpoint_format_version == plan.format_version
    state_files = after.of_kind(*STATE_KINDS)
    assert state_files and {f.version for f in state_files} == {last + 2}
    if plan.format_version == 2:
        named = {f.unique_id for f in state_files}
        assert named == {u for rows in ids.values() for row in rows for u in row}
        assert zip_metadata_versions(root) == {"v1"}  # what Spark 4.1+ reads
    else:
        assert ids is None and {f.unique_id for f in state_files} == {None}
    if name.startswith("spark40") and "2" in change:
        assert plan.zip_metadata_v2 > 0 and plan.provider_from == plan.provider
        report = run_cli("validate", str(root), "--json").json()
        assert not [f for f in report["findings"] if f["code"] == "ZIP_METADATA_V2"]
    undone = undo_convert(after.storage)
    assert undone.restored == len(plan.moved)
    assert tree(root) == original


def test_the_provider_and_format_it_already_has_are_nothing_to_do(tmp_path: Path) -> None:
    root = copy("spark4-rocksdb-v2", tmp_path / "ckpt")
    original = tree(root)
    result = run_cli("convert", str(root), "--format-version", "2", "--apply", "--yes")
    assert result.exit_code == 0, result.stderr
    assert "already uses the rocksdb provider and its format v2" in result.stdout
    assert tree(root) == original
    missing = run_cli("convert", str(root))
    assert missing.exit_code == 2 and "--format-version 1|2" in missing.stderr


def test_a_dry_run_changes_nothing_and_says_what_it_would_do(tmp_path: Path) -> None:
    root = copy("spark4-hdfs-agg", tmp_path / "ckpt")
    original = tree(root)
    result = run_cli("convert", str(root), "--provider", "rocksdb", "--json")
    assert result.exit_code == 0, result.stderr
    body = result.json()
    assert body["provider_from"] == "hdfs" and body["provider"] == "rocksdb"
    assert body["keys"] == 7 and body["files_to_move"] > 0
    assert body["applied"] is False and "result" not in body
    assert tree(root) == original
    assert not (tmp_path / "ckpt.ckpt-quarantine").exists()


def test_a_dry_run_of_an_active_query_warns_and_applying_refuses(tmp_path: Path) -> None:
    root = copy("spark4-hdfs-agg", tmp_path / "ckpt")
    plan_latest_batch(root)  # a batch planned just now: the query looks active
    original = tree(root)
    dry = run_cli("convert", str(root), "--provider", "rocksdb", "--json")
    assert dry.exit_code == 0 and dry.json()["warnings"]
    applied = run_cli("convert", str(root), "--provider", "rocksdb", "--apply", "--yes")
    assert applied.exit_code == 2 and "active" in applied.stderr
    assert tree(root) == original


def test_the_provider_it_already_has_is_nothing_to_do(tmp_path: Path) -> None:
    root = copy("spark4-rocksdb-agg", tmp_path / "ckpt")
    original = tree(root)
    result = run_cli("convert", str(root), "--provider", "rocksdb", "--apply", "--yes")
    assert result.exit_code == 0, result.stderr
    assert "already uses the rocksdb provider" in result.stdout
    assert tree(root) == original


REFUSED = [
    ("spark4-tws-row", ["--provider", "hdfs"], "transformWithState"),
    ("spark4-join-v3-rocksdb", ["--provider", "hdfs"], "column families"),
    ("spark4-hdfs-agg", ["--format-version", "2"], "has only v1 (add --provider rocksdb)"),
    ("spark4-rocksdb-v2", ["--provider", "hdfs", "--format-version", "2"], "has only v1"),
    ("spark4-rocksdb-agg", ["--format-version", "3"], "less than or equal to 2"),
]


@pytest.mark.parametrize(("name", "change", "why"), REFUSED)
def test_what_ckpt_cannot_convert_is_refused_in_one_line(
    name: str, change: list[str], why: str, tmp_path: Path
) -> None:
    root = copy(name, tmp_path / "ckpt")
    original = tree(root)
    for args in ([], ["--apply", "--yes"]):
        result = run_cli("convert", str(root), *change, *args)
        assert result.exit_code == 2, result.stdout
        error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(error) == 1 and why in error[0], result.stderr
    assert tree(root) == original


def test_an_uncommitted_last_batch_is_refused_with_the_commands_that_fix_it(
    tmp_path: Path,
) -> None:
    root = copy("spark4-hdfs-agg", tmp_path / "ckpt")
    last = latest(root)
    shutil.copy(root / "offsets" / str(last), root / "offsets" / str(last + 1))
    with pytest.raises(ConvertRefused) as refused:
        plan_convert(Checkpoint.open(str(root)), provider="rocksdb")
    assert f"last batch ({last + 1}) is not committed" in refused.value.message
    assert "ckpt convert CHECKPOINT --undo" in (refused.value.hint or "")
    bad = run_cli("convert", str(root), "--provider", "parquet")
    assert bad.exit_code == 2 and "--provider parquet" in bad.stderr


def _writes(root: Path, change: list[str]) -> int:
    """How many files a conversion of a copy of ``root`` writes (its checksums included)."""
    probe = root.parent / "probe"
    shutil.copytree(root, probe)
    run = run_convert(Checkpoint.open(str(probe)).storage, Guards(apply=True), **_kwargs(change))
    assert run.result is not None
    shutil.rmtree(probe)
    shutil.rmtree(f"{probe}.ckpt-quarantine")
    return len(run.result.written)


def _kwargs(change: list[str]) -> dict[str, Any]:
    """``--provider P --format-version V`` as run_convert's keywords."""
    pairs = dict(zip(change[::2], change[1::2], strict=True))
    version = pairs.get("--format-version")
    return {
        "provider": pairs.get("--provider"),
        "format_version": int(version) if version else None,
    }


KILLED = [
    ("spark4-hdfs-agg", ["--provider", "rocksdb"]),
    ("spark4-rocksdb-agg", ["--provider", "hdfs"]),
    ("spark4-rocksdb-v2", ["--format-version", "1"]),
    ("spark4-rocksdb-changelog", ["--format-version", "2"]),
]


@pytest.mark.parametrize(("name", "change"), KILLED)
def test_a_conversion_killed_in_any_write_is_undone_to_the_original_bytes(
    name: str, change: list[str], tmp_path: Path
) -> None:
    source = copy(name, tmp_path / "source")
    original = tree(source)
    before = state_of(source)
    writes = _writes(source, change)
    assert writes > 4
    for nth in range(1, writes + 1):
        root = tmp_path / f"ckpt{nth}"
        shutil.copytree(source, root)
        died = die_in_nth_write(nth, f"{root}/", ["convert", str(root), *change, "--apply", "-y"])
        assert died.returncode == 9, died.stderr.decode()
        # Killed part way: nothing committed (Spark's restart fails on the missing version,
        # see convert/apply.py), or killed writing the commit's checksum: done.
        if latest(root) != latest(source):
            assert latest(root) == latest(source) + 1 and state_of(root) == before
        undone = run_cli("convert", str(root), "--undo", "--yes", "--break-lock")
        assert undone.exit_code == 0, undone.stderr
        assert tree(root) == original, nth


@pytest.mark.parametrize(("name", "change"), KILLED)
def test_validate_and_the_commands_judge_a_killed_conversion_as_spark_would(
    name: str, change: list[str], tmp_path: Path
) -> None:
    """Killed at writes all through a conversion (its manifest's too: the old provider's
    files move out between them): validate says OK only while the state Spark would load is
    whole (the offsets conf still names the old provider and none of its files moved yet),
    else NOT OK with a hint naming ``ckpt convert --undo``. Where validate finds the
    interrupted conversion, ``ckpt convert`` and ``ckpt state delete`` refuse, naming it
    too; ``--undo`` gives back every byte."""
    source = copy(name, tmp_path / "source")
    original = tree(source)
    args = [*change, "--apply", "-y"]
    verdicts = set()
    for nth in range(1, 400, 6):
        root = tmp_path / f"ckpt{nth}"
        shutil.copytree(source, root)
        died = die_in_nth_write(nth, str(root), ["convert", str(root), *args])
        if died.returncode == 0:  # it wrote fewer files than that: finished
            break
        assert died.returncode == 9, died.stderr.decode()
        report = run_cli("validate", str(root), "--json").json()
        verdicts.add(report["ok"])
        errors = [f for f in report["findings"] if f["severity"] == "error"]
        if errors:
            assert any("ckpt convert CKPT --undo" in f["hint"] for f in errors), errors
        if any(f["code"] == "UNFINISHED_CONVERSION" for f in report["findings"]):
            for command in (
                ["convert", str(root), *change],
                ["state", "delete", str(root), "--operator", "0", "--where", "key.k = 'k1'"],
            ):
                again = run_cli(*command)
                assert again.exit_code == 2 and "ckpt convert CHECKPOINT --undo" in again.stderr
        if not list(root.parent.glob(f"{root.name}.ckpt-quarantine/convert-*/manifest.json")):
            left = tree(root)
            left.pop(".ckpt-lock", None)
            assert left == original  # killed writing its manifest: nothing changed
            continue
        undone = run_cli("convert", str(root), "--undo", "--yes", "--break-lock")
        assert undone.exit_code == 0, undone.stderr
        assert tree(root) == original, nth
    else:
        raise AssertionError("the conversion never finished")
    assert verdicts == {True, False}


@pytest.mark.parametrize("seed", range(6))
def test_a_conversion_killed_at_random_is_untouched_done_or_undone(
    seed: int, tmp_path: Path
) -> None:
    rng = random.Random(seed)
    name, provider = rng.choice(
        [("spark4-hdfs-agg-200", "rocksdb"), ("spark4-rocksdb-agg-200", "hdfs")]
    )
    root = copy(name, tmp_path / "ckpt")
    original = tree(root)
    before = state_of(root)
    kill_mid_command(["convert", str(root), "--provider", provider, "--apply", "-y"], root, rng)
    quarantine = tmp_path / "ckpt.ckpt-quarantine"
    manifests = list(quarantine.glob("convert-*/manifest.json")) if quarantine.exists() else []
    if not manifests:
        left = tree(root)
        left.pop(".ckpt-lock", None)  # a killed run's lock: the next run breaks it
        assert left == original  # killed before its manifest: nothing changed
        return
    body = json.loads(manifests[0].read_text())
    if body["complete"]:
        assert state_of(root) == before
    undone = run_cli("convert", str(root), "--undo", "--yes", "--break-lock")
    assert undone.exit_code == 0, undone.stderr
    assert tree(root) == original


def test_a_zip_named_with_a_unique_id_in_a_format_v1_checkpoint_is_an_error(
    tmp_path: Path,
) -> None:
    """What a v1 -> v2 conversion killed in its writes could leave (and an old ckpt did):
    Spark's format-v1 loader fails on the name (tests/test_convert_format_spark.py)."""
    root = copy("spark4-rocksdb-changelog", tmp_path / "ckpt")
    assert run_cli("validate", str(root)).exit_code == 0
    zip_file = sorted((root / "state/0/1").glob("*.zip"))[-1]
    shutil.copy(zip_file, zip_file.with_name(f"{zip_file.stem}_{uuid.uuid4()}.zip"))
    report = run_cli("validate", str(root), "--json").json()
    assert not report["ok"]
    (finding,) = [f for f in report["findings"] if f["code"] == "UNFINISHED_CONVERSION"]
    assert finding["severity"] == "error" and "NumberFormatException" in finding["message"]


@pytest.mark.parametrize(
    ("name", "provider", "other"),
    [
        ("spark4-session-hdfs", "rocksdb", "spark4-session-rocksdb"),
        ("spark4-session-rocksdb", "hdfs", "spark4-session-hdfs"),
    ],
)
def test_session_window_keys_are_written_as_spark_writes_them_in_the_other_provider(
    name: str, provider: str, other: str, tmp_path: Path
) -> None:
    """The same query's state on the other provider (its own fixture, same input) is the
    oracle, byte for byte: RocksDB scans a session key by its first column, kept as a row of
    its own before the rest (PrefixKeyScanStateEncoder)."""
    root = copy(name, tmp_path / "ckpt")
    last = latest(root)
    run = run_convert(Checkpoint.open(str(root)).storage, Guards(apply=True), provider=provider)
    assert run.result is not None and run.result.validation.ok
    assert records_at(root, last + 1) == records_at(CASES_DIR / other / "checkpoint", last)


@pytest.mark.parametrize("change", [["--provider", "rocksdb"]])
def test_partitions_a_repartition_left_over_are_not_converted(
    change: list[str], tmp_path: Path
) -> None:
    """After ``ckpt repartition --partitions 1`` partition 1 keeps its old versions (Spark
    never loads it again): the conversion writes partition 0 only, and validates."""
    root = copy("spark4-hdfs-agg", tmp_path / "ckpt")
    done = run_cli("repartition", str(root), "--partitions", "1", "--apply", "--yes")
    assert done.exit_code == 0, done.stderr
    age_everything(root)
    assert (root / "state" / "0" / "1").is_dir()
    result = run_cli("convert", str(root), *change, "--apply", "--yes", "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    written = [w["path"] for w in result.json()["result"]["written"]]
    assert any(w.startswith("state/0/0/") for w in written)
    assert not any(w.startswith("state/0/1/") for w in written)
    assert result.json()["result"]["validation"]["ok"]
