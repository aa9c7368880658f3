"""``state.partition_keys``: which partition each state key belongs to, checked on real Spark data.

Two oracles, neither needing a JVM here:

- every fixture checkpoint (``fixtures/checkpoints``): Spark's shuffle put
  each key in partition ``p`` of N, so ``pmod(hash(partition key), N) == p`` for every key of
  every operator, store and column family;
- ``fixtures/repartition/<case>-to<M>/``: Spark 4.3's own repartition of a RocksDB fixture to
  M partitions, read back by Spark's ``statestore`` reader, or for an HDFS-backed one (which
  Spark refuses) Spark SQL's ``pmod(hash(partition key columns), M)`` of each row it reads
  (``fixtures/generate_repartition.py``): each key of the original checkpoint must be placed
  where Spark put it.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.core.model import Checkpoint
from ckpt_cli.core.read import iter_state
from ckpt_cli.errors import FormatError
from ckpt_cli.formats import spark_types as S
from ckpt_cli.formats.state_encoders import row_checksums
from ckpt_cli.state import partition_keys as K
from ckpt_cli.state.decoders import json_value
from ckpt_cli.state.reader import plan_partition
from ckpt_cli.state.target import resolve_target

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ORACLES = FIXTURES / "repartition"


def _cases() -> list[Path]:
    return sorted((FIXTURES / "checkpoints").glob("*/checkpoint"))


CASES = _cases()


def raw_partitions(ckpt: Checkpoint) -> Iterator[tuple[int, str, int, K.KeyPlacer, list[bytes]]]:
    """(operator, store, partition, its key placer, its raw keys) of every partition of every
    store at the last committed batch."""
    for op in ckpt.operators:
        for store, st in ckpt.operators[op].stores.items():
            target = resolve_target(ckpt, operator=op, store=store)
            checksummed = st.provider == "rocksdb" and row_checksums(ckpt.conf)
            for p in target.partitions:
                placer = K.key_placer(ckpt, op, store, K.family_ids(ckpt, op, store, p))
                plan = plan_partition(ckpt, target, p)
                with closing(iter_state(ckpt, plan, checksummed=checksummed)) as pairs:
                    yield op, store, p, placer, [raw for raw, _value in pairs]


def placed_keys(ckpt: Checkpoint) -> Iterator[tuple[int, str, str, int, Any, K.PartitionKey]]:
    """(operator, store, family, partition, decoded key, its partition key) of every key of
    every store at the last committed batch."""
    for op, store, p, placer, raws in raw_partitions(ckpt):
        for raw in raws:
            family, key = placer.decode(raw)
            yield op, store, family, p, key, placer.keys[family]


@pytest.mark.parametrize("checkpoint", CASES, ids=[c.parent.name for c in CASES])
def test_raw_keys_are_placed_as_decoded_ones(checkpoint: Path) -> None:
    # KeyPlacer.partitions hashes flat keys straight from their UnsafeRow slots: the same
    # partitions as the decoded keys, for every fixture store (with M = 7, not N).
    ckpt = Checkpoint.open(str(checkpoint), {})
    fast = 0
    for _op, _store, _p, placer, raws in raw_partitions(ckpt):
        expected = [placer.partition(raw, 7) for raw in raws]
        assert placer.partitions(raws, 7).tolist() == expected
        fast += bool(placer.rows) and bool(raws)
    if checkpoint.parent.name in (
        "spark4-rocksdb-agg",
        "spark4-hdfs-agg",
        "spark4-join-v3-rocksdb",
    ):
        assert fast, "the slot fast path was not taken"


@pytest.mark.parametrize("checkpoint", CASES, ids=[c.parent.name for c in CASES])
def test_every_key_sits_in_the_partition_its_hash_names(checkpoint: Path) -> None:
    ckpt = Checkpoint.open(str(checkpoint), {})
    seen: collections.Counter[str] = collections.Counter()
    wrong = []
    batches: dict[tuple[int, str], tuple[K.PartitionKey, list[Any], list[int]]] = {}
    for op, store, family, p, key, pk in placed_keys(ckpt):
        n = len(ckpt.operators[op].stores[store].partitions)
        seen[family] += 1
        if pk.partition(key, n) != p:
            wrong.append((op, store, family, p, json_value(key)))
        batch = batches.setdefault((op, family), (pk, [], []))
        batch[1].append(key)
        batch[2].append(p)
    assert seen, "no state keys read"
    assert not wrong, wrong[:5]
    # The vectorised path places them the same.
    for (op, _family), (pk, keys, parts) in batches.items():
        n = len(next(iter(ckpt.operators[op].stores.values())).partitions)
        assert pk.partitions(keys, n).tolist() == parts


def test_every_operator_and_family_kind_is_covered() -> None:
    # The self-check above proves each rule only if the fixtures exercise it.
    families: set[str] = set()
    operators: set[str | None] = set()
    for checkpoint in CASES:
        ckpt = Checkpoint.open(str(checkpoint), {})
        for op in ckpt.operators:
            operators.add(K.operator_name(ckpt, op))
            for keys in K.operator_partition_keys(ckpt, op).values():
                families.update(keys)
    assert {
        "stateStoreSave",
        "dedupe",
        "dedupeWithinWatermark",
        "symmetricHashJoin",
        "sessionWindowStateStoreSaveExec",
        "applyInPandasWithState",
        "transformWithStateInPandasExec",
        "transformWithStateInPySparkExec",
        None,
    } <= operators
    kinds = {"$ttl_", "$min_", "$count_", "$rowCounter_", "Timers_keyToTimestamp"}
    kinds |= {"Timers_timestampToKey", "keyWithIndexToValue", "keyWithTsToValues", "tsWithKey"}
    assert all(any(kind in f for f in families) for kind in kinds), families


def _join_case() -> Checkpoint:
    return Checkpoint.open(str(next(c for c in CASES if c.parent.name == "spark4-join")), {})


def test_the_join_index_is_not_part_of_the_partition_key() -> None:
    # Hashing keyWithIndexToValue's whole key (join key + index) misplaces some rows: the
    # self-check can tell a wrong column choice from the right one.
    ckpt = _join_case()
    whole = 0
    for _op, _store, family, p, key, pk in placed_keys(ckpt):
        if family.endswith("keyWithIndexToValue"):
            assert pk.names == ("field0",)
            n = len(key)
            everything = K.PartitionKey(
                pk.operator, family, (), tuple(range(n)), (), (S.STRING, S.LONG)
            )
            whole += everything.partition(key, 2) != p
    assert whole > 0


def test_transform_with_state_families_use_the_grouping_key() -> None:
    ckpt = Checkpoint.open(str(next(c for c in CASES if c.parent.name == "spark4-tws-avro")), {})
    keys = K.operator_partition_keys(ckpt, 0)["default"]
    assert keys["last"].names == ("key.k",)  # map state: (grouping key, user key)
    assert keys["$ttl_last"].names == ("elementKey.key.k",)
    assert keys["$ttl_cnt"].names == ("elementKey.k",)
    assert keys["$procTimers_timestampToKey"].names == ("key.k",)
    assert keys["$count_seen"].names == ("k",)
    key = {"expirationMs": 5, "elementKey": {"key": {"k": "k1"}, "userKey": {"mk": "x"}}}
    assert keys["$ttl_last"].values(key) == ["k1"]
    assert keys["$ttl_last"].partition(key, 7) == keys["cnt"].partition({"k": "k1"}, 7)


def test_session_windows_drop_the_session_start() -> None:
    schema = S.StructType(
        (S.StructField("k", S.STRING), S.StructField("sessionStartTime", S.TIMESTAMP))
    )
    for operator in (K.SESSION_WINDOW, None):  # None: no operator metadata (Spark < 4.0)
        pk = K.partition_key_columns(operator, "default", schema)
        assert pk.names == ("k",)


def test_unsupported_operators_are_refused_by_name() -> None:
    schema = S.StructType((S.StructField("k", S.STRING),))
    with pytest.raises(FormatError, match="operator 'globalLimit' is not supported"):
        K.partition_key_columns("globalLimit", "default", schema, path="state/3")
    with pytest.raises(FormatError, match="unknown join store"):
        K.partition_key_columns(K.JOIN, "left-somethingNew", schema, path="state/0")
    with pytest.raises(FormatError, match="expected the key to end with 'index'"):
        K.partition_key_columns(K.JOIN, "left-keyWithIndexToValue", schema, path="state/0")
    variant = S.StructType((S.StructField("v", S.VARIANT),))
    with pytest.raises(FormatError, match="variant"):
        K.partition_key_columns("dedupe", "default", variant, path="state/0")


def test_a_null_nested_grouping_key_hashes_as_nulls() -> None:
    ckpt = Checkpoint.open(str(next(c for c in CASES if c.parent.name == "spark4-tws-avro")), {})
    pk = K.operator_partition_keys(ckpt, 0)["default"]["$ttl_last"]
    assert pk.hash({"expirationMs": 1, "elementKey": None}) == 42


# -- Spark's own repartition as the oracle -----------------------------------------------------

ORACLE_CASES = sorted(p for p in ORACLES.glob("*-to*") if (p / "expected.json").is_file())


def _source_checkpoint(name: str) -> Path:
    return next(c for c in CASES if c.parent.name == name)


def _spark_rows(oracle: Path) -> dict[str, dict[str, int]]:
    """read file -> JSON key text -> the partition Spark's reader found it in."""
    out: dict[str, dict[str, int]] = {}
    for f in sorted((oracle / "state").glob("*.jsonl")):
        rows = out.setdefault(f.stem, {})
        for line in f.read_text().splitlines():
            row = json.loads(line)
            rows[json.dumps(row["key"], sort_keys=True)] = row["partition_id"]
    return out


@pytest.mark.skipif(not ORACLE_CASES, reason="no saved Spark repartition results")
@pytest.mark.parametrize("oracle", ORACLE_CASES, ids=[p.name for p in ORACLE_CASES])
def test_keys_go_where_sparks_own_repartition_put_them(oracle: Path) -> None:
    expected = json.loads((oracle / "expected.json").read_text())
    m = expected["num_partitions"]
    spark = _spark_rows(oracle)
    ckpt = Checkpoint.open(str(_source_checkpoint(expected["source_case"])), {})
    compared = 0
    for read in expected["reads"]:
        rows = spark[read["file"]]
        ours: dict[str, int] = {}
        for op, store, family, _p, key, pk in placed_keys(ckpt):
            if op != read["operator"] or family != read["family"]:
                continue
            shown = json_value(key)
            if read.get("key_path"):
                for name in read["key_path"]:
                    shown = shown[name]
            for drop in read.get("drop_key_columns", ()):
                shown = {k: v for k, v in shown.items() if k != drop}
            ours[json.dumps(shown, sort_keys=True)] = pk.partition(key, m)
            del store
        assert set(ours) == set(rows), read
        assert ours == rows, read
        compared += len(rows)
    assert compared > 0


def test_a_damaged_raw_key_is_a_format_error() -> None:
    ckpt = Checkpoint.open(str(next(c for c in CASES if c.parent.name == "spark4-hdfs-agg")), {})
    placer = K.key_placer(ckpt, 0, "default")
    assert placer.rows  # the slot fast path applies to this store
    good = bytes.fromhex("000000000000000002000000100000006b30000000000000")  # ("k0")
    bad = good[:8] + (200 << 32 | 2).to_bytes(8, "little") + good[16:]  # string past the row
    assert placer.partitions([good], 3).tolist() == [placer.partition(good, 3)]
    with pytest.raises(FormatError):
        placer.partitions([good, bad], 3)
    with pytest.raises(FormatError):
        placer.partitions([good[:10]], 3)


def test_a_global_aggregation_stays_in_partition_0() -> None:
    # No grouping key: Spark runs the operator on one partition (AllTuples) and reads only
    # partition 0 on restart. Spark 4.3's own repartition to 5 moves the state to
    # pmod(42, 5) = 2, and the restarted query loses it (checked by hand: NOTES.md).
    pk = K.partition_key_columns("stateStoreSave", "default", S.StructType(()))
    assert pk.partition({}, 5) == 0
    assert pk.partitions([{}, {}], 5).tolist() == [0, 0]
    assert pk.hash({}) == 42
    placer = K.KeyPlacer(
        {"default": pk}, {None: ("default", lambda raw: {})}, rows={"default": (0, 0)}
    )
    assert placer.partitions([b"", b""], 5).tolist() == [0, 0]
