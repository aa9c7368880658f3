"""Format-v2 changelog lineage (validate, replay, change feed) and files no zip names that
Spark keeps (orphans, validate), on damaged copies of the real fixtures."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CASES, CASES_DIR, run_cli
from tests.lineage_damage import BOGUS_ID, edit_lineage_line, rewrite_lineage

pytestmark = pytest.mark.skipif(not CASES, reason="no fixtures")

V2 = CASES_DIR / "spark4-rocksdb-v2" / "checkpoint"
ROCKS = CASES_DIR / "spark4-rocksdb-agg" / "checkpoint"


def copy(root: Path, tmp_path: Path) -> Path:
    dest = tmp_path / root.parent.name
    shutil.copytree(root, dest)
    return dest


def commit_ids(root: Path, batch: int) -> list[list[str]]:
    body = (root / f"commits/{batch}").read_text().split("\n", 1)[1]
    ids: list[list[str]] = json.loads(body)["stateUniqueIds"]["0"]
    return ids


def latest_commit(root: Path) -> int:
    return max(int(p.name) for p in (root / "commits").iterdir() if p.name.isdigit())


def break_latest_lineage(root: Path) -> tuple[Path, int, str]:
    """Partition 0's newest changelog (hidden from a restart by the zip of its version) names
    a uniqueId for the version before it that neither the commit log nor any file has."""
    top = latest_commit(root) + 1
    uid = commit_ids(root, top - 1)[0][0]
    changelog = root / f"state/0/0/{top}_{uid}.changelog"
    assert (root / f"state/0/0/{top}_{uid}.zip").exists()
    rewrite_lineage(changelog, top - 1)
    recorded = commit_ids(root, top - 2)[0][0]
    return changelog, top - 1, recorded


def validate(root: Path, *args: str) -> tuple[int, list[dict[str, Any]]]:
    result = run_cli("validate", str(root), "--json", *args)
    assert result.exit_code in (0, 1), result.stderr
    found: list[dict[str, Any]] = result.json()["findings"]
    return result.exit_code, found


def rows(*args: str) -> tuple[int, list[dict[str, Any]], str]:
    result = run_cli("replay", *args, "--format", "jsonl")
    out = [json.loads(line) for line in result.stdout.splitlines() if line]
    return result.exit_code, sorted(out, key=lambda r: json.dumps(r, sort_keys=True)), result.stderr


# -- item 1: lineage ------------------------------------------------------------------------


def test_validate_finds_a_broken_lineage_a_newer_zip_hides(tmp_path: Path) -> None:
    root = copy(V2, tmp_path)
    changelog, version, recorded = break_latest_lineage(root)
    rel = str(changelog.relative_to(root))
    code, found = validate(root, "--deep", "--all-versions")
    assert code == 1
    broken = [f for f in found if f["code"] == "LINEAGE_MISMATCH"]
    assert len(broken) == 1, found
    f = broken[0]
    assert f["severity"] == "error" and f["paths"] == [rel, f"commits/{version - 1}"]
    assert (f["lineage_version"], f["lineage_unique_id"], f["commit_unique_id"]) == (
        version,
        BOGUS_ID,
        recorded,
    )
    assert rel in f["message"] and BOGUS_ID in f["message"] and recorded in f["message"]
    # Only the lineage is wrong: the checksum sidecars match the rewritten file.
    assert not [f for f in found if f["code"] == "CRC_MISMATCH"]
    # --all-versions alone reads the lineage lines too.
    assert "LINEAGE_MISMATCH" in {f["code"] for f in validate(root, "--all-versions")[1]}
    # A restart loads the zip of that version, as Spark does: it works.
    assert validate(root)[0] == 0


def test_validate_checks_lineage_against_files_when_the_commit_is_purged(tmp_path: Path) -> None:
    root = copy(V2, tmp_path)
    changelog, version, _ = break_latest_lineage(root)
    for name in (f"commits/{version - 1}", f"commits/.{version - 1}.crc"):
        (root / name).unlink()
    _, found = validate(root, "--all-versions")
    broken = [f for f in found if f["code"] == "LINEAGE_MISMATCH"]
    assert len(broken) == 1 and broken[0]["commit_unique_id"] is None, found
    assert f"no file of version {version} has that id" in broken[0]["message"]


def test_validate_reads_the_lineage_line_of_changelogs_no_plan_uses(tmp_path: Path) -> None:
    root = copy(V2, tmp_path)
    top = latest_commit(root) + 1
    changelog = root / f"state/0/0/{top}_{commit_ids(root, top - 1)[0][0]}.changelog"
    edit_lineage_line(changelog, lambda line: b"[{" + line[2:].replace(b'"', b"'"))
    code, found = validate(root, "--all-versions")
    rel = str(changelog.relative_to(root))
    assert code == 1 and [f["paths"] for f in found if f["code"] == "CORRUPT_FILE"] == [[rel]]


def test_replay_answers_as_spark_where_the_zip_is_the_base(tmp_path: Path) -> None:
    root = copy(V2, tmp_path)
    break_latest_lineage(root)
    batch = str(latest_commit(root))
    assert rows(str(root), "--batch", batch)[:2] == rows(str(V2), "--batch", batch)[:2]
    assert rows(str(root), "--batch", batch)[0] == 0


def test_replay_fails_naming_the_broken_link_spark_needs(tmp_path: Path) -> None:
    root = copy(V2, tmp_path)
    changelog, version, recorded = break_latest_lineage(root)
    zip_path = changelog.with_suffix(".zip")
    for p in zip_path.parent.glob(f"*{zip_path.name}*"):
        p.unlink()
    batch = str(latest_commit(root))
    code, _, err = rows(str(root), "--batch", batch, "--partition", "0")
    assert code == 2 and f"{version}_{BOGUS_ID}.changelog" in err and recorded in err
    code, got, err = rows(str(root), "--batch", batch, "--partition", "0", "--best-effort")
    assert code == 0 and got and "instead" in err and f"{version}_{BOGUS_ID}" in err


def test_change_feed_follows_the_lineage_as_spark(tmp_path: Path) -> None:
    root = copy(V2, tmp_path)
    _, version, recorded = break_latest_lineage(root)
    end = latest_commit(root)
    start = end - 1
    feed = ("--changes", "--from", str(start), "--to", str(end))
    code, _, err = rows(str(root), *feed)
    assert code == 2 and f"state/0/0/{version}_{BOGUS_ID}.changelog" in err, err
    # Spark reads no lineage for a one-batch feed: the broken link is not on its path.
    one = ("--changes", "--from", str(end), "--to", str(end))
    assert rows(str(root), *one) == rows(str(V2), *one)
    code, got, err = rows(str(root), *feed, "--best-effort")
    assert code == 0 and "instead" in err and f"{version}_{recorded}.changelog" in err
    assert got == rows(str(V2), *feed)[1]


def test_change_feed_equals_the_commit_logs_files_on_a_healthy_lineage() -> None:
    end = latest_commit(V2)
    code, got, _ = rows(str(V2), "--changes", "--from", str(end - 2), "--to", str(end))
    assert code == 0 and {r["batch_id"] for r in got} == {end - 2, end - 1, end}


# -- item 2: files no zip names ---------------------------------------------------------------


def add_untracked_sst(root: Path) -> Path:
    """A copy of a tracked SST under a name no zip uses, with the tracked files' mtime."""
    ssts = root / "state/0/0/SSTs"
    tracked = sorted(p for p in ssts.iterdir() if p.suffix == ".sst")
    extra = ssts / "000099-0a0a0a0a-1111-4222-8333-444444444444.sst"
    shutil.copyfile(tracked[-1], extra)
    newest = max(p.stat().st_mtime for p in tracked)
    os.utime(extra, (newest, newest))
    return extra


def test_orphans_lists_an_untracked_sst_spark_keeps(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    extra = add_untracked_sst(root)
    rel = str(extra.relative_to(root))
    result = run_cli("orphans", str(root), "--min-age", "0", "--json")
    plan = result.json()
    assert rel not in {d["path"] for d in plan["deletions"] + plan["kept_too_young"]}
    kept = [k for k in plan["kept"] if k["path"] == rel]
    assert len(kept) == 1 and kept[0]["size"] == extra.stat().st_size
    assert kept[0]["class"] == "ORPHAN_SHARED_FILE" and "Spark keeps it" in kept[0]["reason"]
    human = run_cli("orphans", str(root), "--min-age", "0")
    assert "kept" in human.stdout and extra.name in human.stdout.replace("\n", "")


def test_validate_reports_an_untracked_sst_as_orphan_info(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    extra = add_untracked_sst(root)
    code, found = validate(root, "--all-versions")
    orphans = [f for f in found if f["code"] == "ORPHAN_FILE"]
    assert code == 0 and len(orphans) == 1, found
    assert orphans[0]["severity"] == "info" and orphans[0]["paths"] == [
        str(extra.relative_to(root))
    ]
    assert "ckpt orphans" in orphans[0]["hint"]


def test_validate_reports_an_unchosen_attempt_as_orphan_info(tmp_path: Path) -> None:
    root = copy(V2, tmp_path)
    top = latest_commit(root) + 1
    uid = commit_ids(root, top - 1)[0][0]
    lost = root / f"state/0/0/{top}_{BOGUS_ID}.changelog"
    shutil.copyfile(root / f"state/0/0/{top}_{uid}.changelog", lost)
    code, found = validate(root, "--all-versions")
    orphans = [f for f in found if f["code"] == "ORPHAN_FILE"]
    assert code == 0 and [f["paths"] for f in orphans] == [[str(lost.relative_to(root))]]
    assert orphans[0]["severity"] == "info" and uid in orphans[0]["message"]
    plan = run_cli("orphans", str(root), "--min-age", "0", "--json").json()
    assert {d["class"] for d in plan["deletions"] if d["path"].endswith(lost.name)} == {
        "LOST_ATTEMPT"
    }


# -- the default (restart) scope reports every orphan class too ------------------------------


def orphan_findings(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in found if f["code"] == "ORPHAN_FILE"]


def test_default_validate_reports_an_untracked_sst_as_orphan_info(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    extra = add_untracked_sst(root)
    code, found = validate(root)
    orphans = orphan_findings(found)
    assert code == 0 and [f["paths"] for f in orphans] == [[str(extra.relative_to(root))]]
    assert orphans[0]["severity"] == "info" and "ckpt orphans" in orphans[0]["hint"]
    assert orphans[0]["bytes"] == extra.stat().st_size
    # The same file `ckpt orphans` lists as kept: one place decides what is an orphan.
    plan = run_cli("orphans", str(root), "--min-age", "0", "--json").json()
    assert [k["path"] for k in plan["kept"]] == orphans[0]["paths"]


def test_default_validate_reports_an_sst_copied_from_another_partition(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    ssts = root / "state/0/0/SSTs"
    mtime = max(p.stat().st_mtime for p in ssts.glob("*.sst"))
    stray = ssts / sorted((root / "state/0/1/SSTs").glob("*.sst"))[0].name
    assert not stray.exists()
    shutil.copyfile(root / "state/0/1/SSTs" / stray.name, stray)
    os.utime(stray, (mtime, mtime))
    code, found = validate(root)
    assert code == 0 and [f["paths"] for f in orphan_findings(found)] == [
        [str(stray.relative_to(root))]
    ]


@pytest.mark.parametrize("back", [0, 1], ids=["restart-version", "older-version"])
def test_default_validate_reports_an_unchosen_attempt_as_orphan_info(
    tmp_path: Path, back: int
) -> None:
    root = copy(V2, tmp_path)
    version = latest_commit(root) + 1 - back
    uid = commit_ids(root, version - 1)[0][0]
    lost = root / f"state/0/0/{version}_{BOGUS_ID}.changelog"
    shutil.copyfile(root / f"state/0/0/{version}_{uid}.changelog", lost)
    code, found = validate(root)
    orphans = orphan_findings(found)
    assert code == 0 and [f["paths"] for f in orphans] == [[str(lost.relative_to(root))]]
    assert orphans[0]["severity"] == "info" and uid in orphans[0]["message"]
    assert orphans[0]["version"] == version and "ckpt orphans" in orphans[0]["hint"]


def test_restart_scope_leaves_partitions_with_many_zips_to_all_versions(tmp_path: Path) -> None:
    """Settling which SSTs no zip names can take every zip of a partition: the restart scope
    does it only where there are few, and says how many files it left."""
    root = copy(ROCKS, tmp_path)
    extra = add_untracked_sst(root)
    part = root / "state/0/0"
    oldest = min(int(p.stem) for p in part.glob("*.zip"))
    for v in range(oldest - 3, oldest):  # older retained versions
        shutil.copyfile(part / f"{oldest}.zip", part / f"{v}.zip")
    result = run_cli("validate", str(root), "--json")
    data = result.json()
    assert result.exit_code == 0 and not orphan_findings(data["findings"])
    assert data["stats"]["orphans_unresolved"] >= 1
    assert "--all-versions" in run_cli("validate", str(root)).stdout
    code, found = validate(root, "--all-versions")
    assert code == 0 and [f["paths"] for f in orphan_findings(found)] == [
        [str(extra.relative_to(root))]
    ]


def test_default_validate_reports_an_unreadable_older_zip_it_reads(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    add_untracked_sst(root)
    part = root / "state/0/0"
    oldest = min(int(p.stem) for p in part.glob("*.zip"))
    (part / f"{oldest}.zip").write_bytes(b"not a zip")
    (part / f".{oldest}.zip.crc").unlink()
    code, found = validate(root)
    bad = [f for f in found if f["code"] == "CORRUPT_FILE"]
    assert code == 0 and [(f["severity"], f["paths"]) for f in bad] == [
        ("warning", [f"state/0/0/{oldest}.zip"])
    ]
    assert "rollback" in bad[0]["message"] and not orphan_findings(found)
