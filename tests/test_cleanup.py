"""``ckpt orphans`` / ``ckpt cleanup`` on copies of the real fixtures."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.cleanup import apply_cleanup, plan_cleanup
from ckpt_cli.core.model import Checkpoint
from tests.conftest import (
    CASES,
    CASES_DIR,
    Case,
    case_params,
    known_findings,
    replay_args,
    run_cli,
)
from tests.fixture_copies import age_everything, plan_latest_batch

pytestmark = pytest.mark.skipif(not CASES, reason="no fixtures")

HDFS = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"
# Files of an operator itself, never of a version (schema files, operator metadata v1/v2):
# every one is kept.
OPERATOR_FILES = ("/_stateSchema/", "/_metadata/")
ROCKS = CASES_DIR / "spark4-rocksdb-agg" / "checkpoint"


def copy(root: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "ckpt"
    shutil.copytree(root, dest)
    return dest


def replay_rows(root: Path, batch: int, args: list[str]) -> list[str] | None:
    result = run_cli("replay", str(root), "--batch", str(batch), "--format", "jsonl", *args)
    if result.exit_code != 0:
        return None
    return sorted(result.stdout.splitlines())


def stores(case: Case) -> list[list[str]]:
    """The replay options that together read every store (a state variable, the timers or
    a column family at a time where a store holds several)."""
    ckpt = Checkpoint.open(str(case.checkpoint))
    return [
        args
        for op in case.expected["operators"]
        for store in op["stores"]
        for args in replay_args(ckpt, op["id"], store)
    ]


@pytest.mark.parametrize("retain", [1, 2])
@pytest.mark.parametrize("case", case_params())
def test_apply_keeps_every_retained_batch(case: Case, retain: int, tmp_path: Path) -> None:
    root = copy(case.checkpoint, tmp_path)
    age_everything(root)
    ckpt = Checkpoint.open(str(root))
    latest = ckpt.batches.latest_committed
    assert latest is not None
    retained = range(latest - retain, latest + 1)
    before = {(b, i): replay_rows(root, b, a) for b in retained for i, a in enumerate(stores(case))}
    manifest = tmp_path / "manifest.json"
    result = run_cli(
        "cleanup",
        str(root),
        "--retain",
        str(retain),
        "--apply",
        "--yes",
        "--manifest",
        str(manifest),
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert report["applied"] and report["result"]["deleted"] == report["files"]
    deleted = [d["path"] for d in report["deletions"]]
    assert not [p for p in deleted if any(part in f"/{p}" for part in OPERATOR_FILES)]
    if report["files"]:
        written = json.loads(manifest.read_text())
        assert [d["path"] for d in written["plan"]["deletions"]] == [
            d["path"] for d in report["deletions"]
        ]
        for path in written["plan"]["deletions"]:
            assert not (root / path["path"]).exists()
    else:
        assert not manifest.exists()  # nothing to delete: nothing written
    # The cleaned checkpoint validates and replays every retained batch the same.
    validate = run_cli("validate", str(root), "--all-versions", "--fail-on", "warning", "--json")
    known = known_findings(case)
    if known:  # no worse than before: only why Spark (or a newer one) cannot restart it
        problems = {f["code"] for f in validate.json()["findings"] if f["severity"] != "info"}
        assert problems == known, validate.stdout
    else:
        assert validate.exit_code == 0, validate.stdout
    for (batch, i), rows in before.items():
        if rows is not None:
            assert replay_rows(root, batch, stores(case)[i]) == rows, (batch, stores(case)[i])
    # A second run finds nothing more.
    again = run_cli("orphans", str(root), "--retain", str(retain), "--min-age", "0", "--json")
    assert again.exit_code == 0 and again.json()["files"] == 0


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    age_everything(root)
    before = sorted(p for p in root.rglob("*"))
    result = run_cli("cleanup", str(root), "--retain", "1")
    assert result.exit_code == 0
    assert "Dry run" in result.stdout and "OLD_VERSION" in result.stdout
    assert sorted(p for p in root.rglob("*")) == before


def test_orphans_exit_code_and_classes(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    age_everything(root)
    tmp = root / "state/0/0/.11.zip.8d0e8a86-98c5-4f0e-9a6b-0b1f3a3c5d11.tmp"
    tmp.write_bytes(b"PK")
    os.utime(tmp, (time.time() - 7200,) * 2)
    result = run_cli("orphans", str(root), "--retain", "1", "--json")
    assert result.exit_code == 1
    report: dict[str, Any] = result.json()
    assert {"TEMP", "OLD_VERSION", "OLD_SHARED_FILE", "OLD_LOG"} <= set(report["by_class"])
    assert report["bytes"] == sum(d["size"] for d in report["deletions"])


def test_young_files_are_never_planned(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    age_everything(root, 0)  # everything written just now
    plan = plan_cleanup(Checkpoint.open(str(root)), retain=1, min_age=3600)
    assert plan.deletions == [] and plan.kept_young


def test_active_query_is_refused(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    age_everything(root)
    plan_latest_batch(root)  # planned and written just now: the query looks active
    result = run_cli("cleanup", str(root), "--retain", "1", "--apply", "--yes")
    assert result.exit_code == 2 and "looks active" in result.stderr
    forced = run_cli("cleanup", str(root), "--retain", "1", "--apply", "--yes", "--force")
    assert forced.exit_code == 0
    assert "warning: the query looks active (" in forced.stderr
    assert "): going ahead with --force" in forced.stderr


def test_apply_without_yes_needs_a_terminal(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    age_everything(root)
    result = run_cli("cleanup", str(root), "--retain", "1", "--apply")
    assert result.exit_code == 2 and "--yes" in result.stderr


def test_retain_default(tmp_path: Path) -> None:
    # Spark does not pin minBatchesToRetain in the offsets conf: its default applies...
    plan = plan_cleanup(Checkpoint.open(str(HDFS)), min_age=0)
    assert plan.retain == 100 and "default" in plan.retain_source
    # ...unless the conf carries it (a query that set it on its session).
    root = copy(HDFS, tmp_path)
    latest = max(int(p.name) for p in (root / "offsets").iterdir() if p.name.isdigit())
    entry = root / f"offsets/{latest}"
    header, meta, *rest = entry.read_text().split("\n")
    body = json.loads(meta)
    body["conf"]["spark.sql.streaming.minBatchesToRetain"] = "2"
    entry.write_text("\n".join([header, json.dumps(body), *rest]))
    (entry.parent / f".{entry.name}.crc").unlink(missing_ok=True)
    plan = plan_cleanup(Checkpoint.open(str(root)), min_age=0)
    assert plan.retain == 2 and "offsets conf" in plan.retain_source


def test_deletion_order_is_crash_safe() -> None:
    plan = plan_cleanup(Checkpoint.open(str(ROCKS)), retain=1, min_age=0)
    classes = [d.klass for d in plan.deletions if d.klass != "CHECKSUM"]
    last_own = max(i for i, c in enumerate(classes) if c in ("OLD_VERSION", "OLD_LOG"))
    first_shared = min(i for i, c in enumerate(classes) if c.endswith("SHARED_FILE"))
    assert last_own < first_shared


def test_an_sst_only_the_zip_of_a_batch_in_flight_names_is_never_deleted(tmp_path: Path) -> None:
    """The zip of a version after the latest commit (a batch in flight) names an SST older
    than every file the retained zips name: it is not an orphan, whatever its age."""
    import zipfile

    root = copy(ROCKS, tmp_path)
    age_everything(root)
    part = root / "state/0/0"
    top = max(int(p.stem) for p in part.glob("*.zip"))
    sst = sorted((part / "SSTs").glob("*.sst"))[0]
    extra = sst.with_name("000099-0a0a0a0a-1111-4222-8333-444444444444.sst")
    shutil.copyfile(sst, extra)
    old = min(p.stat().st_mtime for p in (part / "SSTs").iterdir()) - 600
    os.utime(extra, (old, old))
    with zipfile.ZipFile(part / f"{top}.zip") as src:
        entries = {n: src.read(n) for n in src.namelist()}
    header, body = entries["metadata"].decode().split("\n", 1)
    meta = json.loads(body)
    meta["sstFiles"].append(
        {
            "localFileName": "000099.sst",
            "dfsSstFileName": extra.name,
            "sizeBytes": sst.stat().st_size,
        }
    )
    entries["metadata"] = f"{header}\n{json.dumps(meta)}".encode()
    with zipfile.ZipFile(part / f"{top + 1}.zip", "w") as dst:
        for name, data in entries.items():
            dst.writestr(name, data)
    plan = plan_cleanup(Checkpoint.open(str(root)), retain=1, min_age=0)
    rel = str(extra.relative_to(root))
    assert rel not in {d.path for d in plan.deletions + plan.kept_young + plan.kept}


@pytest.mark.parametrize("case", case_params())
def test_orphans_spare_operator_files(case: Case) -> None:
    plan = plan_cleanup(Checkpoint.open(str(case.checkpoint)), min_age=0)
    for d in plan.deletions + plan.kept_young + plan.kept:
        assert not any(part in f"/{d.path}" for part in OPERATOR_FILES), d


def test_the_check_sees_a_deleted_retained_zip(tmp_path: Path) -> None:
    """The checks above can fail: a cleanup that also deletes the newest zip's SSTs (of a
    store with column families) is caught by validate."""
    root = copy(CASES_DIR / "spark4-tws-row" / "checkpoint", tmp_path)
    age_everything(root)
    ckpt = Checkpoint.open(str(root))
    plan = plan_cleanup(ckpt, retain=1, force=False)
    assert any(d.path.endswith(".zip") for d in plan.deletions)  # state is cleaned at all
    apply_cleanup(ckpt, plan, manifest=str(tmp_path / "manifest.json"))
    for sst in (root / "state/0/0/SSTs").glob("*.sst"):
        sst.unlink()
    result = run_cli("validate", str(root), "--all-versions", "--json")
    assert result.exit_code == 1
    assert any(f["severity"] == "error" for f in result.json()["findings"])
