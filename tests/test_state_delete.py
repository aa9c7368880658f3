"""``ckpt state delete`` on copies of real fixtures: the state after is the state before
minus exactly the matched keys (HDFS delta of removals, RocksDB changelog of deletes, RocksDB
new zip), validate is clean, ``--undo`` gives back every byte, a dry run changes nothing and
writes the audit file, what ckpt cannot delete is refused in one line, and a deletion killed
at any write is undone. The ``--where`` language on its own. (Spark's reader and a restart
judge the result in ``test_state_delete_spark.py``.)"""

from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

import ckpt_cli
from ckpt_cli.api import Guards, run_delete, undo_delete
from ckpt_cli.delete.selection import PartitionMatch
from ckpt_cli.errors import UsageError
from ckpt_cli.state.where import WhereError, parse_where
from ckpt_cli.storage import Storage
from tests.conftest import CASES_DIR, run_cli
from tests.fixture_copies import age_everything, latest
from tests.kill_support import die_in_nth_write, kill_after, tree

pytestmark = pytest.mark.skipif(not CASES_DIR.is_dir(), reason="no fixtures")

# (fixture, --where, how version N+2 is written)
CASES = [
    ("spark4-hdfs-agg", "key.k in ('k0', 'k5') or value.count > 5", "delta"),
    ("spark4-hdfs-agg-zstd", "value.sum >= 250", "delta"),
    ("spark4-rocksdb-agg", "key.k = 'k3'", "snapshot"),
    ("spark4-rocksdb-changelog", "value.count < 5 and key.k != 'k6'", "changelog"),
    ("spark4-dedup", "key.id <= 'e3'", "snapshot"),
    ("spark4-dedup-ww-hdfs", "key.id is not null", "delta"),
    ("spark4-fmgws-rocksdb", "value.groupState.cnt >= 2", "changelog"),
    ("spark4-hdfs-agg-200", "value.count = 1", "delta"),
    # Checkpoint format v2: V3 changelogs named <v>_<uniqueId>, commits with stateUniqueIds.
    ("spark4-rocksdb-v2", "key.k in ('k1', 'k2')", "changelog"),
    ("spark41-rocksdb-v2", "value.count > 3", "changelog"),
    # Two operators: the other's version N+2 is written unchanged.
    ("spark4-multi-op", "key.k = 'k1'", "delta"),
    ("spark4-multi-op-rocksdb", "key.k = 'k2'", "changelog"),
]


def copy(name: str, dest: Path) -> Path:
    shutil.copytree(CASES_DIR / name / "checkpoint", dest)
    age_everything(dest)
    return dest


def rows(root: Path, operator: int = 0) -> list[str]:
    ckpt = ckpt_cli.open(str(root))
    return sorted(
        json.dumps(r, sort_keys=True, default=str) for r in ckpt.replay(operator=operator)
    )


def other_operators(root: Path) -> dict[int, list[str]]:
    return {op: rows(root, op) for op in ckpt_cli.open(str(root)).operators if op != 0}


@pytest.mark.parametrize(("name", "where", "writes"), CASES)
def test_the_state_after_is_the_state_before_minus_the_matched_keys(
    name: str, where: str, writes: str, tmp_path: Path
) -> None:
    root = copy(name, tmp_path / "ckpt")
    original = tree(root)
    before, others = rows(root), other_operators(root)
    test = parse_where(where)
    matched = [r for r in before if test(json.loads(r))]
    assert matched and (len(matched) < len(before) or name == "spark4-dedup-ww-hdfs")
    audit = tmp_path / "matched.jsonl"
    run = run_delete(
        Storage.from_url(str(root)),
        Guards(apply=True),
        operator=0,
        where=where,
        output=str(audit),
    )
    assert run.result is not None and run.result.validation.ok
    assert run.plan.writes == writes and run.result.removed == len(matched)
    assert latest(root) == latest(CASES_DIR / name / "checkpoint") + 1
    assert rows(root) == sorted(set(before) - set(matched))
    assert other_operators(root) == others
    written = sorted(
        json.dumps(json.loads(line), sort_keys=True) for line in audit.read_text().splitlines()
    )
    assert written == sorted(matched)
    undone = undo_delete(Storage.from_url(str(root)))
    assert undone.removed > 0 and tree(root) == original


@pytest.mark.parametrize("name", ["spark4-session-hdfs", "spark4-session-rocksdb"])
def test_a_session_window_key_goes_with_every_session(name: str, tmp_path: Path) -> None:
    root = copy(name, tmp_path / "ckpt")
    before = [json.loads(r) for r in rows(root)]
    one = before[0]["key"]
    sessions = [r for r in before if r["key"]["k"] == one["k"]]
    assert len(sessions) > 1  # several sessions of one key
    where = f"key.sessionStartTime = '{one['sessionStartTime']}'"
    run = run_delete(Storage.from_url(str(root)), Guards(apply=True), operator=0, where=where)
    assert run.result is not None and run.result.validation.ok
    assert run.result.removed == len(sessions)
    assert [json.loads(r) for r in rows(root)] == [r for r in before if r not in sessions]


JOIN_STORES = [
    "left-keyToNumValues",
    "left-keyWithIndexToValue",
    "right-keyToNumValues",
    "right-keyWithIndexToValue",
]


# State format 4: rows by (join key, event time), and their index by event time.
JOIN_V4_STORES = [
    "left-keyWithTsToValues",
    "left-tsWithKey",
    "right-keyWithTsToValues",
    "right-tsWithKey",
]


def join_rows(root: Path, stores: list[str] = JOIN_STORES) -> dict[str, list[dict[str, object]]]:
    ckpt = ckpt_cli.open(str(root))
    return {
        store: sorted(
            (json.loads(json.dumps(r, default=str)) for r in ckpt.replay(operator=0, store=store)),
            key=lambda r: json.dumps(r, sort_keys=True),
        )
        for store in stores
    }


@pytest.mark.parametrize(
    ("name", "where", "writes"),
    [
        ("spark4-join", "key.field0 = 'k1'", "delta"),
        ("spark4-join-v2-rocksdb", "key.field0 in ('k0', 'k2') or value.value > 2", "changelog"),
        # State format 3: the four stores are column families of one store.
        ("spark4-join-v3-rocksdb", "key.field0 = 'k1'", "changelog"),
    ],
)
def test_a_join_key_goes_from_its_four_stores_on_both_sides(
    name: str, where: str, writes: str, tmp_path: Path
) -> None:
    root = copy(name, tmp_path / "ckpt")
    original = tree(root)
    before = join_rows(root)
    test = parse_where(where)
    matched = {
        r["key"]["field0"]  # type: ignore[index]
        for store in JOIN_STORES[::2]
        for r in before[store]
        if test(r)
    }
    assert matched
    audit = tmp_path / "matched.jsonl"
    run = run_delete(
        Storage.from_url(str(root)), Guards(apply=True), operator=0, where=where, output=str(audit)
    )
    assert run.result is not None
    assert run.result.validation.ok, run.result.validation
    assert run.plan.writes == writes
    after = join_rows(root)
    for store in JOIN_STORES:
        kept = [r for r in before[store] if r["key"]["field0"] not in matched]  # type: ignore[index]
        assert after[store] == kept, store
        assert len(kept) < len(before[store]) or store.startswith("right")
    removed = [json.loads(line) for line in audit.read_text().splitlines()]
    assert len(removed) == sum(len(before[s]) - len(after[s]) for s in JOIN_STORES)
    assert {r["store"] for r in removed} <= set(JOIN_STORES)
    undone = undo_delete(Storage.from_url(str(root)))
    assert undone.removed > 0 and tree(root) == original


def test_a_join_key_goes_from_the_four_families_of_state_format_4(tmp_path: Path) -> None:
    """Format 4 keeps each side's rows by (join key, event time) and an index by event
    time: the key's entries go from all four, every other entry stays."""
    root = copy("spark4-join-v4-rocksdb", tmp_path / "ckpt")
    original = tree(root)
    before = join_rows(root, JOIN_V4_STORES)
    audit = tmp_path / "matched.jsonl"
    run = run_delete(
        Storage.from_url(str(root)),
        Guards(apply=True),
        operator=0,
        where="key.field0 = 'k1'",
        output=str(audit),
    )
    assert run.result is not None
    assert run.result.validation.ok, run.result.validation
    assert run.plan.writes == "changelog" and run.result.removed == 1
    after = join_rows(root, JOIN_V4_STORES)
    for store in JOIN_V4_STORES:
        kept = [r for r in before[store] if r["key"]["field0"] != "k1"]  # type: ignore[index]
        assert after[store] == kept and len(kept) < len(before[store]), store
    removed = [json.loads(line) for line in audit.read_text().splitlines()]
    assert {r["store"] for r in removed} == set(JOIN_V4_STORES)
    assert {r["key"]["field0"] for r in removed} == {"k1"}
    undone = undo_delete(Storage.from_url(str(root)))
    assert undone.removed > 0 and tree(root) == original


def test_keys_from_a_file_as_replay_prints_them(tmp_path: Path) -> None:
    root = copy("spark4-rocksdb-changelog", tmp_path / "ckpt")
    before = rows(root)
    keys = tmp_path / "keys.jsonl"
    keys.write_text(before[0] + "\n" + json.dumps({"k": "nope"}) + "\n")
    result = run_cli(
        "state",
        "delete",
        str(root),
        "--operator",
        "0",
        "--keys",
        str(keys),
        "--apply",
        "--yes",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    assert result.json()["matched"] == 1 and rows(root) == before[1:]


def test_a_dry_run_changes_nothing(tmp_path: Path) -> None:
    root = copy("spark4-hdfs-agg", tmp_path / "ckpt")
    original = tree(root)
    result = run_cli(
        "state", "delete", str(root), "--operator", "0", "--where", "key.k = 'k0'", "--json"
    )
    assert result.exit_code == 0, result.stderr
    body = result.json()
    assert body["applied"] is False and body["matched"] == 1 and body["keys"] == 7
    assert body["writes"] == "delta" and body["sample"][0]["key"] == {"k": "k0"}
    assert tree(root) == original
    text = run_cli("state", "delete", str(root), "--operator", "0", "--where", "key.k = 'k0'")
    assert "Deletes 1 of 7 keys" in text.stdout and "Dry run" in text.stdout


REFUSED = [
    ("spark4-join", ["--where", "key.k = 1"], "no column key.k"),
    # A join in state format 4 keeps no counts: its key columns only.
    ("spark4-join-v4-rocksdb", ["--where", "value.value > 1"], "no column value.value"),
    ("spark4-hdfs-agg", ["--where", "key.nope = 1"], "no column key.nope"),
    ("spark4-hdfs-agg", ["--where", "key.k = = 1"], "expected a value"),
    ("spark4-hdfs-agg", [], "--where EXPR or --keys FILE"),
    ("spark4-hdfs-agg", ["--operator", "7", "--where", "key.k = 1"], "no operator 7"),
]


@pytest.mark.parametrize(("name", "args", "why"), REFUSED)
def test_what_ckpt_cannot_delete_is_refused_in_one_line(
    name: str, args: list[str], why: str, tmp_path: Path
) -> None:
    assert_refused(copy(name, tmp_path / "ckpt"), args, why)


def assert_refused(root: Path, args: list[str], why: str) -> None:
    """``ckpt state delete ROOT ARGS`` (operator 0 unless named), dry run and --apply: exit
    2, one ``error:`` line that says ``why``, and nothing changed."""
    original = tree(root)
    operator = [] if "--operator" in args else ["--operator", "0"]
    for apply in ([], ["--apply", "--yes"]):
        result = run_cli("state", "delete", str(root), *operator, *args, *apply)
        assert result.exit_code == 2, result.stdout
        error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(error) == 1 and why in error[0], result.stderr
    assert tree(root) == original


@pytest.mark.parametrize(
    "name",
    [
        "spark4-hdfs-agg",
        "spark4-rocksdb-agg",
        "spark4-rocksdb-v2",
        "spark4-multi-op",
        "spark4-join",
    ],
)
def test_a_deletion_killed_in_any_write_is_undone(name: str, tmp_path: Path) -> None:
    source = copy(name, tmp_path / "source")
    original = tree(source)
    column = "key.field0" if "join" in name else "key.k"
    args = ["--operator", "0", "--where", f"{column} = 'k0'", "--apply", "-y"]
    probe = tmp_path / "probe"
    shutil.copytree(source, probe)
    done = run_cli("state", "delete", str(probe), *args, "--json")
    writes = len(done.json()["result"]["written"])
    for nth in range(1, writes + 1):
        root = tmp_path / f"ckpt{nth}"
        shutil.copytree(source, root)
        died = die_in_nth_write(nth, f"{root}/", ["state", "delete", str(root), *args])
        assert died.returncode == 9, died.stderr.decode()
        undone = run_cli("state", "delete", str(root), "--undo", "--yes", "--break-lock")
        assert undone.exit_code == 0, undone.stderr
        assert tree(root) == original, nth


@pytest.mark.parametrize("seed", range(6))
def test_a_deletion_killed_at_random_is_untouched_done_or_undone(seed: int, tmp_path: Path) -> None:
    """SIGKILL at a random moment under the lock, on 200 partitions, format v2 and two
    operators: nothing changed (killed before the manifest), or ``--undo`` gives back every
    byte; a deletion that finished has removed exactly the matched keys."""
    rng = random.Random(seed)
    name, where = rng.choice(
        [
            ("spark4-hdfs-agg-200", "value.count = 1"),
            ("spark4-rocksdb-agg-200", "value.count = 1"),
            ("spark4-rocksdb-v2", "key.k = 'k1'"),
            ("spark4-multi-op", "key.k = 'k1'"),
        ]
    )
    # The moment: anywhere in the time a whole deletion takes (timed on a probe copy).
    probe = copy(name, tmp_path / "probe")
    start = time.monotonic()
    done = run_cli(
        "state", "delete", str(probe), "--operator", "0", "--where", where, "--apply", "-y"
    )
    assert done.exit_code == 0, done.stderr
    span = time.monotonic() - start
    root = copy(name, tmp_path / "ckpt")
    original, before = tree(root), rows(root)
    args = ["state", "delete", str(root), "--operator", "0", "--where", where, "--apply", "-y"]
    kill_after(args, root, rng.uniform(0, span))
    quarantine = tmp_path / "ckpt.ckpt-quarantine"
    manifests = list(quarantine.glob("delete-*/manifest.json")) if quarantine.exists() else []
    if not manifests:
        left = tree(root)
        left.pop(".ckpt-lock", None)  # a killed run's lock: the next run breaks it
        assert left == original  # killed before its manifest: nothing changed
        return
    if json.loads(manifests[0].read_text())["complete"]:
        test = parse_where(where)
        assert rows(root) == [r for r in before if not test(json.loads(r))]
    undone = run_cli("state", "delete", str(root), "--undo", "--yes", "--break-lock")
    assert undone.exit_code == 0, undone.stderr
    assert tree(root) == original


ROW = {"key": {"user": "u1", "n": 3}, "value": {"last": "2024-02-01", "note": None, "x": 2.5}}


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("key.user = 'u1'", True),
        ("user = 'u1'", True),  # a bare name: the key's, else the value's
        ("key.user != 'u1'", False),
        ("value.last < '2024-01-01'", False),
        ("value.last >= '2024-01-01' and key.n > 2", True),
        ("key.n > 5 or value.x <= 2.5", True),
        ("key.n > 5 or value.x < 2.5 and key.user = 'u1'", False),  # and binds tighter
        ("(key.n > 5 or value.x <= 2.5) and key.user = 'u2'", False),
        ("key.user in ('a', 'u1')", True),
        ("key.user not in ('a', 'u1')", False),
        ("value.note is null", True),
        ("value.note is not null", False),
        ("value.note = null", True),
        ("value.note < 1", False),  # null is neither less nor more
        ("key.user = 'it''s'", False),
        ("key.n = 3", True),
    ],
)
def test_the_where_language(where: str, expected: bool) -> None:
    columns = ["key.user", "key.n", "value.last", "value.note", "value.x"]
    assert parse_where(where, columns)(ROW) is expected


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("key.user =", "expected a value"),
        ("key.user ~ 1", "cannot read '~"),
        ("key.user = 'a' and", "expected a column"),
        ("(key.user = 'a'", "expected )"),
        ("key.nope = 1", "no column key.nope"),
        ("key.user = 'a' key.n = 1", "expected and, or or the end"),
        ("key.user in 'a'", "expected ( after in"),
        ("key.user is 1", "expected null"),
    ],
)
def test_a_bad_where_is_one_line_naming_the_token(where: str, message: str) -> None:
    with pytest.raises(WhereError) as error:
        parse_where(where, ["key.user", "key.n"])
    assert message in error.value.message and "\n" not in error.value.message
    assert isinstance(error.value, UsageError)


# Stores whose --keys are matched by their stored bytes (HDFS, RocksDB with and without
# changelogs, format v2, 200 partitions, a dedup's and flatMapGroupsWithState's keys).
RAW_KEY_CASES = [
    "spark4-hdfs-agg",
    "spark4-hdfs-agg-zstd",
    "spark4-rocksdb-agg",
    "spark4-rocksdb-changelog",
    "spark4-rocksdb-v2",
    "spark4-dedup",
    "spark4-fmgws-rocksdb",
    "spark4-hdfs-agg-200",
    "spark33-rocksdb-agg",
    "spark4-multi-op",
]


@pytest.mark.parametrize("name", RAW_KEY_CASES)
def test_keys_matched_by_their_bytes_are_the_keys_decoding_matches(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--keys (every third key of the state, a key of another type, one that is not there):
    matched by their stored bytes, the same records, rows and order as decoding every key
    finds; and the stored bytes were what matched them."""
    from ckpt_cli.delete import matching
    from ckpt_cli.delete.matching import Matcher, MatchSpec

    root = copy(name, tmp_path / "ckpt")
    ckpt = ckpt_cli.open(str(root))
    keys = [json.loads(r)["key"] for r in rows(root)][::3]
    keys += [{"k": 12345}, {"nope": "x"}, {**keys[0], "extra": 1}]
    spec = MatchSpec(0, latest(root), keys=tuple(keys))

    fast = Matcher(ckpt, spec)
    assert fast.raw_keys is not None
    used = []
    real = fast._match_raw

    def counted(out: PartitionMatch, raw_keys: Any) -> Any:
        used.append(out.partition)
        return real(out, raw_keys)

    monkeypatch.setattr(fast, "_match_raw", counted)
    by_bytes = [fast.match(p) for p in fast.partitions]
    assert used == fast.partitions
    assert all(real(PartitionMatch(p), fast.raw_keys) is not None for p in fast.partitions)

    monkeypatch.setattr(matching, "flat_row_encoder", lambda schema: None)
    slow = Matcher(ckpt, spec)
    assert slow.raw_keys is None
    by_decoding = [slow.match(p) for p in slow.partitions]
    assert by_bytes == by_decoding
    assert sum(m.matched for m in by_bytes) == len(keys) - 3


def test_keys_that_do_not_encode_back_are_matched_by_decoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a partition's keys do not come back byte for byte from their decoded rows (here:
    an encoder that writes one byte more), the partition is matched by decoding: the same
    keys go."""
    from ckpt_cli.delete import matching
    from ckpt_cli.delete.matching import Matcher, MatchSpec
    from ckpt_cli.formats.unsaferow import flat_row_encoder

    root = copy("spark4-rocksdb-changelog", tmp_path / "ckpt")
    ckpt = ckpt_cli.open(str(root))
    keys = tuple(json.loads(r)["key"] for r in rows(root)[:4])
    spec = MatchSpec(0, latest(root), keys=keys)
    want = [Matcher(ckpt, spec).match(p) for p in Matcher(ckpt, spec).partitions]

    def off_by_one(schema: object) -> object:
        encode = flat_row_encoder(schema)  # type: ignore[arg-type]
        assert encode is not None
        return lambda row: (encode(row) or b"") + b"\x00"

    monkeypatch.setattr(matching, "flat_row_encoder", off_by_one)
    skewed = Matcher(ckpt, spec)
    assert skewed.raw_keys is not None
    assert all(
        skewed._match_raw(PartitionMatch(p), skewed.raw_keys) is None for p in skewed.partitions
    )
    assert [skewed.match(p) for p in skewed.partitions] == want
    assert sum(m.matched for m in want) == 4


def test_rows_are_handed_on_or_kept_as_asked(tmp_path: Path) -> None:
    """A deletion of every key holds none of their rows when a sink takes them (this
    process), and the first ``keep`` when it returns them (a task)."""
    from ckpt_cli.delete.matching import Matcher, MatchSpec

    root = copy("spark4-hdfs-agg", tmp_path / "ckpt")
    ckpt = ckpt_cli.open(str(root))
    matcher = Matcher(ckpt, MatchSpec(0, latest(root), where="key.k is not null"))
    for p in matcher.partitions:
        handed: list[dict[str, Any]] = []
        out = matcher.match(p, sink=handed.append)
        assert out.matched == out.keys > 2 and not out.rows and len(handed) == out.matched
        assert len(matcher.match(p, keep=2).rows) == 2
        assert matcher.match(p).rows == handed
