"""``ckpt relocate`` on copies of real fixtures: the copy names its own home where Spark
recorded the old one (transformWithState's schema paths), the input files' new prefix with
``--input`` (source logs and their compact files), reads as the source does, and validates;
the source is untouched; a non-empty new home is refused; a copy that dies part way is
resumed; S3 <-> local copies are counted in requests, with no HEAD per object. (Spark
restarts the results in ``test_relocate_spark.py``.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import ckpt_cli
from ckpt_cli.api import Guards, parse_inputs, run_relocate
from ckpt_cli.state.tws import state_variables
from ckpt_cli.storage import Storage
from tests.conftest import CASES_DIR, run_cli
from tests.fixture_copies import age_everything
from tests.kill_support import die_in_nth_write, tree
from tests.servers import S3Server

pytestmark = pytest.mark.skipif(not CASES_DIR.is_dir(), reason="no fixtures")


def copy(name: str, dest: Path) -> Path:
    shutil.copytree(CASES_DIR / name / "checkpoint", dest)
    age_everything(dest)
    return dest


def rows(location: str, options: dict[str, Any] | None = None) -> list[str]:
    """Every store's rows as ckpt reads them (a transformWithState operator's: each state
    variable's, and its timers)."""
    ckpt = ckpt_cli.open(location, options)
    reads: list[dict[str, Any]] = []
    for op in ckpt.operators.values():
        variables = state_variables(ckpt, op.id)
        if variables is None:
            reads += [{"operator": op.id, "store": store} for store in op.stores]
        else:
            reads += [{"operator": op.id, "state_var": v} for v in variables]
            reads.append({"operator": op.id, "timers": True})
    return sorted(
        json.dumps([read, row], sort_keys=True, default=str)
        for read in reads
        for row in ckpt.replay(**read)
    )


def test_a_transform_with_state_copy_names_its_new_home(tmp_path: Path) -> None:
    src = copy("spark4-tws-row", tmp_path / "src")
    before = tree(src)
    assert "SCHEMA_PATHS_ELSEWHERE" in run_cli("validate", str(src), "--json").stdout
    dest = tmp_path / "new" / "home"
    result = run_cli("relocate", str(src), str(dest), "--apply", "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    body = result.json()
    assert body["result"]["rewritten"] == 2 and body["result"]["validation"]["ok"]
    for meta in (dest / "state" / "0" / "_metadata" / "v2").glob("[0-9]*"):
        text = meta.read_text()
        assert f'"file:{dest}/state/0/_stateSchema/' in text and "ckpt-fixture-gen" not in text
    validated = run_cli("validate", str(dest), "--json").json()
    assert validated["ok"] and not validated["findings"]
    assert rows(str(dest)) == rows(str(src))
    assert tree(src) == before  # the source is only read
    # Every file but the rewritten ones (and their checksums) byte for byte.
    copied, original = tree(dest), tree(src)
    assert copied.keys() == original.keys()
    differ = {k for k in copied if copied[k] != original[k]}
    assert {k.rsplit("/", 1)[-1] for k in differ} == {"0", "6", ".0.crc", ".6.crc"}


def test_input_prefixes_are_rewritten_in_source_logs_and_compact_files(tmp_path: Path) -> None:
    src = copy("spark4-hdfs-agg", tmp_path / "src")
    old = json.loads((src / "sources" / "0" / "0").read_text().splitlines()[1])["path"]
    old_dir = old.rsplit("/", 1)[0]
    dest = tmp_path / "dest"
    result = run_cli(
        "relocate", str(src), str(dest), "--input", f"{old_dir}=s3a://bucket/in", "--apply", "-y"
    )
    assert result.exit_code == 0, result.stderr
    logs = [p for p in (dest / "sources" / "0").iterdir() if not p.name.startswith(".")]
    assert any(p.name.endswith(".compact") for p in logs)
    for log in logs:
        for line in log.read_text().splitlines()[1:]:
            assert json.loads(line)["path"].startswith("s3a://bucket/in/"), log
    assert run_cli("validate", str(dest)).exit_code == 0
    # A prefix that matches nothing is said, not silently ignored.
    dry = run_cli("relocate", str(src), str(tmp_path / "d2"), "--input", "/nowhere=/x", "--json")
    assert dry.exit_code == 0 and "nothing of --input applies" in dry.json()["warnings"][0]
    assert parse_inputs(["/a=/b"]) == [("file:///a", "file:///b")]
    bad = run_cli("relocate", str(src), str(tmp_path / "d3"), "--input", "nonsense")
    assert bad.exit_code == 2 and "OLD=NEW" in bad.stderr


def test_a_new_home_that_is_not_empty_or_inside_is_refused(tmp_path: Path) -> None:
    src = copy("spark4-hdfs-agg", tmp_path / "src")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "something").write_text("x")
    for dest, why in (
        (taken, "not empty"),
        (src / "sub", "inside the checkpoint"),
        (src, "itself"),
    ):
        for args in ([], ["--apply", "--yes"]):
            result = run_cli("relocate", str(src), str(dest), *args)
            assert result.exit_code == 2, result.stdout
            error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
            assert len(error) == 1 and why in error[0], result.stderr
    assert (taken / "something").read_text() == "x" and not (src / "sub").exists()


@pytest.mark.parametrize("nth", [1, 5, 40])
def test_a_copy_that_died_is_resumed(nth: int, tmp_path: Path) -> None:
    src = copy("spark4-tws-row", tmp_path / "src")
    whole = tmp_path / "whole"
    assert run_cli("relocate", str(src), str(whole), "--apply", "-y").exit_code == 0
    dest = tmp_path / "dest"
    died = die_in_nth_write(nth, f"{dest}/", ["relocate", str(src), str(dest), "--apply", "-y"])
    assert died.returncode == 9, died.stderr.decode()
    assert (dest / ".ckpt-relocating").exists() == (nth > 1)  # the first write is the marker
    again = run_cli("relocate", str(src), str(dest), "--apply", "--yes", "--break-lock", "--json")
    assert again.exit_code == 0, again.stderr
    assert again.json()["resuming"] is True
    got = tree(dest)
    want = tree(whole)
    # The homes differ; everything else is the same bytes, and no temp file is left.
    assert got.keys() == want.keys()
    same = [k for k in got if not k.startswith("state/0/_metadata/v2/")]
    assert all(got[k] == want[k] for k in same)


@pytest.mark.s3
def test_local_to_s3_and_back_in_counted_requests(s3_server: S3Server, tmp_path: Path) -> None:
    src = copy("spark4-tws-row", tmp_path / "src")
    fs = s3_server.fs()
    if not fs.exists("relocate"):
        fs.mkdir("relocate")
    s3 = Storage.from_url("s3://relocate/q1", s3_server.options)
    mark = s3_server.mark()
    run = run_relocate(
        Storage.from_url(str(src)), s3, Guards(apply=True), spark_home="s3a://relocate/q1"
    )
    served = s3_server.requests_since(mark)
    assert run.result is not None and run.result.validation.ok, run.result
    files = len(run.plan.files) - 2  # the two rewritten files' local checksums are not copied
    # No HEAD per object: the two are the listing's look at the new home, which is not there.
    assert served["head"] <= 2
    assert served["put"] == files + 1  # each file once, and the marker
    text = fs.cat("relocate/q1/state/0/_metadata/v2/6").decode()
    assert '"s3a://relocate/q1/state/0/_stateSchema/' in text
    assert rows("s3://relocate/q1", s3_server.options) == rows(str(src))
    back = tmp_path / "back"
    mark = s3_server.mark()
    home = Storage.from_url("s3://relocate/q1", s3_server.options)
    done = run_relocate(home, Storage.from_url(str(back)), Guards(apply=True, force=True))
    served = s3_server.requests_since(mark)
    assert done.result is not None and done.result.validation.ok
    assert served["head"] == 0 and served["put"] == 1  # the source's lock, nothing else
    assert f'"file:{back}/state/0/_stateSchema/' in (back / "state/0/_metadata/v2/6").read_text()


@pytest.mark.parametrize("nth", [None, 1, 5, 40])
def test_undo_removes_the_copy_finished_or_not_and_leaves_the_source(
    nth: int | None, tmp_path: Path
) -> None:
    src = copy("spark4-tws-row", tmp_path / "src")
    original = tree(src)
    dest = tmp_path / "dest"
    args = ["relocate", str(src), str(dest), "--apply", "-y"]
    if nth is None:
        assert run_cli(*args).exit_code == 0
    else:
        assert die_in_nth_write(nth, f"{dest}/", args).returncode == 9
    # A killed run leaves its lock: --break-lock, as for any killed run.
    unlock = [] if nth is None else ["--break-lock"]
    undone = run_cli("relocate", str(src), str(dest), "--undo", "--json", *unlock)
    assert undone.exit_code == 0, undone.stderr
    assert undone.json()["removed"] > 0 or nth == 1
    assert not list(dest.rglob("*"))  # no file, no directory left in the new home
    assert tree(src) == original
    again = run_cli("relocate", str(src), str(dest), "--undo")
    assert again.exit_code == 0 and "Nothing to undo" in again.stdout
    # The new home takes a copy again.
    assert run_cli(*args).exit_code == 0


def test_undo_keeps_a_copy_the_query_ran_on_unless_forced(tmp_path: Path) -> None:
    src = copy("spark4-tws-row", tmp_path / "src")
    dest = tmp_path / "dest"
    assert run_cli("relocate", str(src), str(dest), "--apply", "-y").exit_code == 0
    newest = max(int(p.name) for p in (dest / "offsets").iterdir() if p.name.isdigit())
    shutil.copy(dest / "offsets" / str(newest), dest / "offsets" / str(newest + 1))
    kept = tree(dest)
    refused = run_cli("relocate", str(src), str(dest), "--undo")
    assert refused.exit_code == 2 and f"offsets/{newest + 1}" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) <= 2  # the error and its hint
    assert tree(dest) == kept
    forced = run_cli("relocate", str(src), str(dest), "--undo", "--force", "--json")
    assert forced.exit_code == 0 and forced.json()["others"] == 1
    assert not list(dest.rglob("*"))
    # Without its source a copy may be the only one: not removed.
    assert run_cli("relocate", str(src), str(dest), "--apply", "-y").exit_code == 0
    shutil.rmtree(src)
    gone = run_cli("relocate", str(src), str(dest), "--undo")
    assert gone.exit_code == 2 and "may be the only one" in gone.stderr
    assert list(dest.rglob("*"))
    both = run_cli("relocate", str(tmp_path / "x"), str(dest), "--undo", "--apply")
    assert both.exit_code == 2


@pytest.mark.s3
def test_undo_removes_a_copy_on_s3(s3_server: S3Server, tmp_path: Path) -> None:
    src = copy("spark4-tws-row", tmp_path / "src")
    fs = s3_server.fs()
    if not fs.exists("relocate-undo"):
        fs.mkdir("relocate-undo")
    s3 = Storage.from_url("s3://relocate-undo/q1", s3_server.options)
    run = run_relocate(Storage.from_url(str(src)), s3, Guards(apply=True))
    assert run.result is not None
    done = ckpt_cli.open(str(src)).undo_relocate(s3)
    assert done.removed == len(fs.find("relocate-undo/q1")) or not fs.find("relocate-undo/q1")
    assert not fs.find("relocate-undo/q1")
