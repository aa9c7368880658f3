"""``ckpt repair`` on damaged copies of real fixtures: plans, apply, validate, undo."""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.core.model import Checkpoint, FileKind
from ckpt_cli.formats.checksums import parse_hadoop_crc, verify_hadoop_crc
from ckpt_cli.storage import Storage
from tests.conftest import CASES, CASES_DIR, run_cli
from tests.fixture_copies import age_everything

pytestmark = pytest.mark.skipif(not CASES, reason="no fixtures")

HDFS = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"
ROCKS = CASES_DIR / "spark4-rocksdb-agg" / "checkpoint"
V2 = CASES_DIR / "spark4-rocksdb-v2" / "checkpoint"


def copy(root: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "ckpt"
    shutil.copytree(root, dest)
    return dest


def tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def latest(root: Path) -> int:
    return max(int(p.name) for p in (root / "commits").iterdir() if p.name.isdigit())


def repair(root: Path, *args: str) -> tuple[int, dict[str, Any]]:
    if "--apply" in args:
        age_everything(root)
    result = run_cli("repair", str(root), "--json", *args)
    assert result.exit_code in (0, 1), result.stderr
    data: dict[str, Any] = result.json()
    return result.exit_code, data


def validate_ok(root: Path) -> bool:
    result = run_cli("validate", str(root), "--json")
    return bool(result.json()["ok"])


def test_healthy_checkpoint_needs_nothing(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    code, plan = repair(root)
    assert code == 0 and plan["actions"] == [] and plan["rollback_to"] is None


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    (root / f"state/0/1/{latest(root) + 1}.delta").unlink()
    before = tree(root)
    code, plan = repair(root)
    assert code == 1 and plan["actions"] and plan["applied"] is False
    assert tree(root) == before


def test_truncated_latest_delta_rolls_back_and_undo_restores(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    n = latest(root)
    delta = root / f"state/0/1/{n + 1}.delta"
    delta.write_bytes(delta.read_bytes()[:-8])
    temp = root / "state/0/0/.12.delta.0b3b0a9e-2f5e-4a43-9c7e-3d3b3c1f0a11.tmp"
    temp.write_bytes(b"LZ4Block")
    before = tree(root)
    assert not validate_ok(root)
    code, plan = repair(root, "--apply", "--yes")
    assert code == 0, plan
    assert plan["rollback_to"] == n - 1
    moved = {a["path"] for a in plan["actions"] if a["action"] == "quarantine"}
    assert {f"commits/{n}", f"offsets/{n}", f"state/0/1/{n + 1}.delta"} <= moved
    assert str(temp.relative_to(root)) in moved
    assert plan["result"]["validation"]["ok"] and validate_ok(root)
    assert not (root / f"commits/{n}").exists()
    # Everything moved is in the quarantine beside the checkpoint, with the manifest.
    manifest = Path(plan["result"]["manifest"])
    assert manifest.parent.parent.name == "ckpt.ckpt-quarantine"
    body = json.loads(manifest.read_text())
    assert body["complete"] and len(body["changes"]) == len(plan["actions"])
    # --undo finds the newest repair's manifest beside the checkpoint.
    undo = run_cli("repair", str(root), "--undo")
    assert undo.exit_code == 0, undo.stderr
    assert tree(root) == before
    assert json.loads(manifest.read_text())["undone"]
    # A second undo says so, exit 0, and changes nothing (it used to fail: "no longer exists").
    again = run_cli("repair", str(root), "--undo", "--json")
    assert again.exit_code == 0, again.stderr
    assert again.json()["already_undone"] and again.json()["restored"] == 0
    assert tree(root) == before
    text = run_cli("repair", str(root), "--undo")
    assert text.exit_code == 0 and "Already undone" in text.stdout


def test_hand_edited_offsets_gets_its_crc_rewritten(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    n = latest(root)
    entry = root / f"offsets/{n}"
    entry.write_text(entry.read_text().replace('"batchWatermarkMs":0', '"batchWatermarkMs": 0'))
    before = tree(root)
    code, plan = repair(root, "--apply", "--yes")
    assert code == 0
    assert [(a["action"], a["path"]) for a in plan["actions"]] == [
        ("rewrite_checksum", f"offsets/.{n}.crc")
    ]
    crc = parse_hadoop_crc("crc", (root / f"offsets/.{n}.crc").read_bytes())
    assert verify_hadoop_crc(crc, entry.read_bytes()) is None
    undo = run_cli("repair", str(root), "--undo", "--manifest", plan["result"]["manifest"])
    assert undo.exit_code == 0 and tree(root) == before


def test_missing_sst_of_latest_zip_rolls_back(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    n = latest(root)
    with zipfile.ZipFile(root / f"state/0/0/{n + 1}.zip") as zf:
        meta = json.loads(zf.read("metadata").decode().split("\n", 1)[1])
    newest = max(meta["sstFiles"], key=lambda s: s["localFileName"])
    (root / "state/0/0/SSTs" / newest["dfsSstFileName"]).unlink()
    code, plan = repair(root, "--apply", "--yes")
    assert code == 0, plan
    assert plan["rollback_to"] is not None and plan["rollback_to"] < n
    assert validate_ok(root)


def test_v2_missing_changelog_rolls_back(tmp_path: Path) -> None:
    root = copy(V2, tmp_path)
    ckpt = Checkpoint.open(str(root))
    n = latest(root)
    commit = ckpt.commit(n)
    assert commit.state_unique_ids
    uid = commit.state_unique_ids[0][0][0]
    for p in (root / "state/0/0").glob(f"{n + 1}_{uid}.*"):
        p.unlink()
    code, plan = repair(root, "--apply", "--yes")
    assert code == 0, plan
    assert plan["rollback_to"] == n - 1
    assert validate_ok(root)


def test_explicit_rollback_to(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    n = latest(root)
    code, plan = repair(root, "--rollback-to", str(n - 1), "--apply", "--yes")
    assert code == 0 and plan["rollback_to"] == n - 1
    ckpt = Checkpoint.open(str(root))
    assert ckpt.batches.latest_committed == n - 1
    assert not any(f.version and f.version > n for f in ckpt.of_kind(FileKind.DELTA))
    result = run_cli("repair", str(root), "--rollback-to", "999")
    assert result.exit_code == 2 and "latest committed batch" in result.stderr


def test_snapshot_writes_the_restart_version(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    version = latest(root) + 1
    for part in (0, 1):
        snap = root / f"state/0/{part}/{version}.snapshot"
        snap.unlink(missing_ok=True)
        (snap.parent / f".{snap.name}.crc").unlink(missing_ok=True)
    rows = run_cli("replay", str(root), "--format", "jsonl").stdout
    code, plan = repair(root, "--snapshot", "--apply", "--yes")
    assert code == 0
    written = [a["path"] for a in plan["actions"] if a["action"] == "write_snapshot"]
    assert written == [f"state/0/0/{version}.snapshot", f"state/0/1/{version}.snapshot"]
    for path in written:
        inspect = run_cli("inspect", str(root / path), "--json").json()
        assert inspect["status"] == "ok" and inspect["records"]["complete"]
        assert all(c["ok"] for c in inspect["checksums"])
    # The version now loads from the snapshot alone, with the same rows.
    from ckpt_cli.core.rebuild import plan_version

    ckpt = Checkpoint.open(str(root))
    assert plan_version(ckpt, 0, 0, version).steps == []
    assert sorted(run_cli("replay", str(root), "--format", "jsonl").stdout.splitlines()) == sorted(
        rows.splitlines()
    )


def test_refuses_without_metadata(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    (root / "metadata").unlink()
    result = run_cli("repair", str(root), "--apply", "--yes")
    assert result.exit_code == 2 and "cannot repair" in result.stderr


def test_apply_without_yes_needs_a_terminal(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    (root / f"state/0/1/{latest(root) + 1}.delta").unlink()
    age_everything(root)
    result = run_cli("repair", str(root), "--apply")
    assert result.exit_code == 2 and "--yes" in result.stderr


def test_undo_of_a_bad_manifest(tmp_path: Path) -> None:
    bad = tmp_path / "m.json"
    bad.write_text("{}")
    root = copy(HDFS, tmp_path)
    result = run_cli("repair", str(root), "--undo", "--manifest", str(bad))
    assert result.exit_code == 2 and "not a ckpt repair manifest" in result.stderr
    nothing = run_cli("repair", str(root), "--undo")
    assert nothing.exit_code == 2 and "no repair to undo" in nothing.stderr


def test_killed_upload_leaves_an_empty_sst_that_repair_quarantines(tmp_path: Path) -> None:
    crashed = CASES_DIR / "spark4-crash-rocksdb-sst" / "checkpoint"
    if not crashed.is_dir():
        pytest.skip("no crash fixture")
    root = copy(crashed, tmp_path)
    found = run_cli("validate", str(root), "--json").json()["findings"]
    empty = sorted(p for f in found if f["code"] == "EMPTY_FILE" for p in f["paths"])
    assert empty and all("/SSTs/" in p and (root / p).stat().st_size == 0 for p in empty)
    code, plan = repair(root, "--apply", "--yes")
    assert code == 0
    moved = {a["path"] for a in plan["actions"] if a["action"] == "quarantine"}
    assert set(empty) <= moved
    after = run_cli("validate", str(root), "--json", "--fail-on", "warning").json()
    assert after["ok"], after["findings"]


@pytest.mark.parametrize("moved_before_the_kill", [True, False])
def test_a_repair_interrupted_mid_change_is_undone_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moved_before_the_kill: bool
) -> None:
    # A kill between a move and its manifest update used to lose that move: undo left the
    # file in the quarantine (tests/test_kill_spark.py found it with SIGKILL).
    from ckpt_cli import repair as repair_module

    root = copy(HDFS, tmp_path)
    n = latest(root)
    delta = root / f"state/0/1/{n + 1}.delta"
    delta.write_bytes(delta.read_bytes()[:-8])
    age_everything(root)
    before = tree(root)
    real_move_out = Storage.move_out
    calls = 0

    def killed_on_third_move(*args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            if moved_before_the_kill:
                real_move_out(*args, **kwargs)
            raise KeyboardInterrupt  # stands for the kill: nothing after it runs
        real_move_out(*args, **kwargs)

    monkeypatch.setattr(Storage, "move_out", killed_on_third_move)
    ckpt = Checkpoint.open(str(root))
    plan = repair_module.plan_repair(ckpt)
    with pytest.raises(KeyboardInterrupt):
        repair_module.apply_repair(ckpt, plan)
    monkeypatch.undo()
    assert tree(root) != before
    (manifest,) = tmp_path.glob("ckpt.ckpt-quarantine/*/manifest.json")
    undo = run_cli("repair", str(root), "--undo", "--manifest", str(manifest))
    assert undo.exit_code == 0, undo.stderr
    assert tree(root) == before


def test_runs_in_the_same_second_get_their_own_quarantine(tmp_path: Path) -> None:
    """A repair or repartition finishing a killed run in the same second must not reuse (and
    replace the manifest in) the killed run's quarantine: that run's undo needs it."""
    from ckpt_cli.repair.apply import default_quarantine as repair_quarantine
    from ckpt_cli.repartition.apply import default_quarantine as repartition_quarantine

    root = copy(CASES_DIR / "spark4-hdfs-agg" / "checkpoint", tmp_path)
    ckpt = Checkpoint.open(Storage.from_url(str(root)))
    for default in (repair_quarantine, repartition_quarantine):
        seen = set()
        for _ in range(3):
            where = default(ckpt, 1_700_000_000.0)
            assert where not in seen and Path(where).parent == Path(f"{root}.ckpt-quarantine")
            seen.add(where)
            Path(where).mkdir(parents=True)
            (Path(where) / "manifest.json").write_text("{}")
