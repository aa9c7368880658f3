"""``ckpt state delete`` on a distributed engine killed at random: the process dies (as
``kill -9`` would: ``os._exit``) before its Nth write or rename of a file in the checkpoint,
after the tasks staged their files beside it. Either nothing changed (killed before the
manifest), or ``--undo`` gives back every byte; where validate accepts what was left, the
rows are those before or after the deletion, never a mix. The local engine's kills are in
``test_state_delete.py`` and, judged by Spark, ``test_kill_change_spark.py``."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

import ckpt_cli
from ckpt_cli.state.where import parse_where
from tests.conftest import CASES_DIR, run_cli
from tests.kill_support import ENV, tree
from tests.test_delete_tasks import copy

pytestmark = pytest.mark.skipif(not CASES_DIR.is_dir(), reason="no fixtures")

# Dies at the Nth file opened for writing or renamed into the checkpoint (not its lock), or
# prints how many there were.
_SCRIPT = """
import builtins, os, sys
from pathlib import Path
from ckpt_cli.change.flow import Guards
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.delete.run import run_delete
from tests.test_repartition_tasks import Tasks

nth, root, where = int(sys.argv[1]), sys.argv[2], sys.argv[3]
events = 0

def tick(path):
    global events
    path = str(path)
    if path.startswith(root + "/") and not path.endswith(".ckpt-lock"):
        events += 1
        if events == nth:
            os._exit(9)

real_open, real_replace = builtins.open, os.replace

def dying_open(file, mode="r", *args, **kwargs):
    if "w" in mode:
        tick(file)
    return real_open(file, mode, *args, **kwargs)

def dying_replace(src, dst, *args, **kwargs):
    tick(dst)
    return real_replace(src, dst, *args, **kwargs)

builtins.open, os.replace = dying_open, dying_replace
storage = Checkpoint.open(root).storage
run_delete(storage, Guards(apply=True), operator=0, where=where, engine=Tasks(Path(root).parent))
print("EVENTS", events)
"""

CASES = [
    ("spark4-rocksdb-v2", "key.k in ('k1', 'k2')"),  # format v2: changelogs with lineage
    ("spark4-rocksdb-agg", "key.k = 'k3'"),  # a new zip and its SSTs
    ("spark4-tws-row", "key.k = 'k1'"),  # every column family
    ("spark4-hdfs-agg-200", "value.count = 1"),  # 200 partitions
]


def run(nth: int, root: Path, where: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(nth), str(root), where],
        env=ENV,
        capture_output=True,
        text=True,
    )


def rows(root: Path, name: str) -> list[str]:
    """The rows at the last committed batch (a transformWithState query's ``total``)."""
    state_var = "total" if "tws" in name else None
    found = ckpt_cli.open(str(root)).replay(operator=0, state_var=state_var)
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in found)


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize(("name", "where"), CASES)
def test_a_distributed_deletion_killed_at_random_is_untouched_done_or_undone(
    name: str, where: str, seed: int, tmp_path: Path
) -> None:
    probe = copy(name, tmp_path / "probe" / "ckpt")
    done = run(10**9, probe, where)
    assert done.returncode == 0, done.stderr
    events = int(done.stdout.split("EVENTS")[-1])
    assert events > 3
    nth = random.Random(f"{name} {seed}").randint(1, events)

    root = copy(name, tmp_path / name / "ckpt")
    original, before = tree(root), rows(root, name)
    died = run(nth, root, where)
    assert died.returncode == 9, died.stderr
    quarantine = root.parent / "ckpt.ckpt-quarantine"
    if not list(quarantine.glob("delete-*/manifest.json")):
        left = tree(root)
        left.pop(".ckpt-lock", None)
        assert left == original, nth  # killed before its manifest: nothing changed
        return
    if run_cli("validate", str(root), "--json").json()["ok"]:
        # What a restart would read: the state before (the deletion batch not committed,
        # Spark runs it again over the old state) or the state after, never a mix.
        after = rows(root, name)
        test = parse_where(where)
        gone = {r for r in before if test(json.loads(r))}
        assert gone and after in (before, sorted(set(before) - gone)), nth
    undone = run_cli("state", "delete", str(root), "--undo", "--yes", "--break-lock")
    assert undone.exit_code == 0, undone.stdout + undone.stderr
    assert tree(root) == original, nth
