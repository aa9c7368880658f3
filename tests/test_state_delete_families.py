"""``ckpt state delete`` on transformWithState fixtures: a grouping key goes from every
column family that holds it (values, lists, map entries, TTL index entries, a list's
counters, both timer families), or, with ``--state-var`` / ``--timers``, from that variable's
families / the timers' only; every other record stays byte for byte. Checked two ways: the
rows ckpt's reader gives per state variable and timers, and the raw records of every
family (the key's bytes appear in no key left). Spark judges the result in
``test_state_delete_spark.py``."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

import ckpt_cli
from ckpt_cli.api import Guards, run_delete, undo_delete
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.core.read import iter_state, read_zip_metadata
from ckpt_cli.core.rebuild import plan_version
from ckpt_cli.state.tws import registers_timers, state_variables, zips_of
from ckpt_cli.storage import Storage
from tests.conftest import CASES_DIR, run_cli
from tests.fixture_copies import age_everything, latest
from tests.kill_support import die_in_nth_write, tree
from tests.test_state_delete import assert_refused

pytestmark = pytest.mark.skipif(not CASES_DIR.is_dir(), reason="no fixtures")

# (fixture, a grouping key column and value that some key has)
CASES = [
    ("spark4-tws-row", "k1"),  # value, list, map, event-time timers
    ("spark4-tws-pandas", "k1"),  # every variable with a TTL, processing-time timers
    ("spark4-tws-avro", "k2"),  # the same under Avro encoding
    ("spark4-tws-row-v2", "k0"),  # checkpoint format v2
    ("spark4-tws-vars", "k1"),  # a variable added, one dropped
    ("spark4-tws-ttl-evolve", "k1"),  # a dropped map's TTL index left in the store
    ("spark4-tws-evolve-avro", "both"),  # values of two schema versions
]


def copy(name: str, dest: Path) -> Path:
    """A copy of the fixture that names its own schema files (``ckpt relocate``: a plain
    copy of a transformWithState checkpoint is one Spark cannot restart)."""
    moved = run_cli("relocate", str(CASES_DIR / name / "checkpoint"), str(dest), "--apply", "--yes")
    assert moved.exit_code == 0, moved.stderr
    age_everything(dest)
    return dest


def user_rows(root: Path) -> dict[str, list[str]]:
    """ckpt's rows of every state variable and of the timers, as Spark's reader shows
    them."""
    ckpt = ckpt_cli.open(str(root))
    out = {}
    names: list[str | None] = list(state_variables(ckpt, 0) or [])
    for name in names + ([None] if registers_timers(ckpt, 0) else []):
        rows = ckpt.replay(operator=0, state_var=name, timers=name is None)
        out[name or "timers"] = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)
    return out


def records(root: Path) -> dict[str, list[tuple[bytes, bytes]]]:
    """Every record of the newest version of every partition, by column family name: the
    raw key and value."""
    ckpt: Checkpoint = ckpt_cli.open(str(root))
    store = ckpt.operators[0].stores["default"]
    version = latest(root) + 1
    out: dict[str, list[tuple[bytes, bytes]]] = {}
    for partition in store.partitions:
        names: dict[int, str] = {}
        for f in zips_of(ckpt, 0, "default", partition):
            meta = read_zip_metadata(ckpt.storage, f.path, f.entry.size)
            names.update({i: n for n, i in meta.column_family_mapping.items()})
        for key, value in iter_state(ckpt, plan_version(ckpt, 0, partition, version)):
            name = names[int.from_bytes(key[:2], "little", signed=True)]
            out.setdefault(name, []).append((key, value))
    return out


def holds(raw_key: bytes, key: str) -> bool:
    """Whether a raw key holds the grouping key's text (UnsafeRow and Avro keep a string's
    UTF-8 bytes as they are; k0..k3, old, new and both are no one's substring)."""
    return key.encode() in raw_key


def without(rows: list[str], key: str) -> list[str]:
    return [r for r in rows if json.loads(r)["key"]["k"] != key]


def family_counts(found: dict[str, list[tuple[bytes, bytes]]]) -> Counter[str]:
    return Counter({name: len(rs) for name, rs in found.items()})


@pytest.mark.parametrize(("name", "key"), CASES)
def test_a_grouping_key_goes_from_every_column_family(name: str, key: str, tmp_path: Path) -> None:
    root = copy(name, tmp_path / "ckpt")
    original = tree(root)
    before, raw_before = user_rows(root), records(root)
    audit = tmp_path / "matched.jsonl"
    run = run_delete(
        Storage.from_url(str(root)),
        Guards(apply=True),
        operator=0,
        where=f"key.k = '{key}'",
        output=str(audit),
    )
    assert run.result is not None and run.result.validation.ok, run.result
    assert run.plan.writes == "changelog" and run.result.removed == 1
    assert set(run.plan.column_families) >= set(raw_before) - {"default"}
    assert latest(root) == latest(CASES_DIR / name / "checkpoint") + 1
    after, raw_after = user_rows(root), records(root)
    for var, rows in before.items():
        assert after[var] == without(rows, key), var
    removed = [json.loads(line) for line in audit.read_text().splitlines()]
    assert {r["key"]["k"] for r in removed} == {key}
    # Raw: the records of each family that held the key are gone, and only those.
    gone = Counter(r["column_family"] for r in removed)
    assert family_counts(raw_before) - family_counts(raw_after) == gone
    for family, recs in raw_after.items():
        kept = [r for r in raw_before[family] if not holds(r[0], key)]
        assert sorted(recs) == sorted(kept), family
    assert all(any(holds(r[0], key) for r in raw_before[f]) for f in gone)
    assert len(gone) > 1  # more than one family held it
    undone = undo_delete(Storage.from_url(str(root)))
    assert undone.removed > 0 and tree(root) == original


@pytest.mark.parametrize(
    ("name", "args", "changed"),
    [
        ("spark4-tws-row", ["--state-var", "buckets"], {"buckets"}),
        ("spark4-tws-pandas", ["--state-var", "seen"], {"seen"}),
        ("spark4-tws-pandas", ["--timers"], {"timers"}),
        ("spark4-tws-row", ["--timers"], {"timers"}),
    ],
)
def test_one_state_variable_or_the_timers_only(
    name: str, args: list[str], changed: set[str], tmp_path: Path
) -> None:
    root = copy(name, tmp_path / "ckpt")
    before, raw_before = user_rows(root), records(root)
    result = run_cli(
        "state", "delete", str(root), "--operator", "0", "-w", "key.k = 'k1'", *args,
        "--apply", "--yes", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    body = result.json()
    families = set(body["column_families"])
    after, raw_after = user_rows(root), records(root)
    for var, rows in before.items():
        assert after[var] == (without(rows, "k1") if var in changed else rows), var
    for family, recs in raw_before.items():
        if family in families:
            assert len(raw_after.get(family, [])) < len(recs), family
        else:
            assert sorted(raw_after.get(family, [])) == sorted(recs), family
    # A variable's TTL entries and list counters go with it.
    if args == ["--state-var", "seen"]:
        assert families == {"seen", "$ttl_seen", "$min_seen", "$count_seen", "$rowCounter_seen"}


def test_a_state_variable_selected_by_its_values(tmp_path: Path) -> None:
    """``value.*`` with --state-var: the grouping keys one of whose values match; all of
    that variable's records of them go (here: every list element of the key)."""
    root = copy("spark4-tws-row", tmp_path / "ckpt")
    before = user_rows(root)
    hits = {
        json.loads(r)["key"]["k"]
        for r in before["events"]
        if json.loads(r)["list_element"]["v"] >= 50
    }
    assert 0 < len(hits) < len({json.loads(r)["key"]["k"] for r in before["events"]})
    run = run_delete(
        Storage.from_url(str(root)),
        Guards(apply=True),
        operator=0,
        where="value.v >= 50",
        state_var="events",
    )
    assert run.result is not None and run.result.validation.ok
    assert run.result.removed == len(hits)
    after = user_rows(root)
    assert after["events"] == [r for r in before["events"] if json.loads(r)["key"]["k"] not in hits]
    assert all(after[v] == before[v] for v in before if v != "events")


def test_keys_from_a_file_as_replay_prints_them(tmp_path: Path) -> None:
    root = copy("spark4-tws-row", tmp_path / "ckpt")
    before = user_rows(root)
    keys = tmp_path / "keys.jsonl"
    keys.write_text(before["total"][0] + "\n")
    gone = json.loads(before["total"][0])["key"]["k"]
    result = run_cli(
        "state", "delete", str(root), "--operator", "0", "--keys", str(keys), "--apply", "--yes"
    )
    assert result.exit_code == 0, result.stderr
    assert user_rows(root) == {v: without(rows, gone) for v, rows in before.items()}


REFUSED = [
    ("spark4-tws-row", ["--state-var", "nope", "-w", "key.k = 'k1'"], "no state variable 'nope'"),
    ("spark4-tws-row", ["-w", "value.s > 1"], "no column value.s"),
    ("spark4-tws-row", ["--state-var", "total", "--timers", "-w", "key.k = 'k1'"], "one of them"),
    ("spark4-tws-evolve-avro", ["--timers", "-w", "key.k = 'both'"], "registers no timers"),
    ("spark4-tws-checksum", ["-w", "key.k = 'k1'"], "row checksums"),
    ("spark4-hdfs-agg", ["--state-var", "cnt", "-w", "key.k = 'k1'"], "transformWithState"),
]


@pytest.mark.parametrize(("name", "args", "why"), REFUSED)
def test_what_ckpt_cannot_delete_is_refused_in_one_line(
    name: str, args: list[str], why: str, tmp_path: Path
) -> None:
    assert_refused(copy(name, tmp_path / "ckpt"), args, why)


@pytest.mark.parametrize("name", ["spark4-tws-pandas", "spark4-tws-row-v2"])
def test_a_deletion_killed_in_any_write_is_undone(name: str, tmp_path: Path) -> None:
    source = copy(name, tmp_path / "source")
    original = tree(source)
    args = ["--operator", "0", "--where", "key.k = 'k1'", "--apply", "-y"]
    probe = tmp_path / "probe"
    shutil.copytree(source, probe)
    done = run_cli("state", "delete", str(probe), *args, "--json")
    writes = len(done.json()["result"]["written"])
    assert writes > 3
    for nth in range(1, writes + 1):
        root = tmp_path / f"ckpt{nth}"
        shutil.copytree(source, root)
        died = die_in_nth_write(nth, f"{root}/", ["state", "delete", str(root), *args])
        assert died.returncode == 9, died.stderr.decode()
        undone = run_cli("state", "delete", str(root), "--undo", "--yes", "--break-lock")
        assert undone.exit_code == 0, undone.stderr
        assert tree(root) == original, nth


def test_a_plain_copy_is_told_to_be_relocated(tmp_path: Path) -> None:
    """A transformWithState checkpoint copied as files still names its schema files where
    Spark ran it: the plan says so and names the command (a relocated copy hears nothing)."""
    plain = tmp_path / "plain"
    shutil.copytree(CASES_DIR / "spark4-tws-row" / "checkpoint", plain)
    relocated = copy("spark4-tws-row", tmp_path / "relocated")
    for root, told in ((plain, True), (relocated, False)):
        result = run_cli(
            "state", "delete", str(root), "--operator", "0", "-w", "key.k = 'k1'", "--json"
        )
        assert result.exit_code == 0, result.stderr
        notes = [n for n in result.json()["notes"] if "ckpt relocate" in n]
        assert bool(notes) is told, result.json()["notes"]
