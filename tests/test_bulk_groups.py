"""``replay/bulk._same_keys``: records grouped by key (first and last record of each key,
ordered by first) exactly as applying them in order does, whatever the hashes' high bits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckpt_cli.state import bulk


def _records(keys: list[bytes]) -> tuple[bytes, Any, Any]:
    sizes = np.array([len(k) for k in keys], np.int64)
    offsets = np.cumsum(sizes) - sizes
    return b"".join(keys) + b"\0" * 8, offsets, sizes


def _expected(keys: list[bytes]) -> tuple[list[int], list[int]]:
    seen: dict[bytes, list[int]] = {}
    for i, k in enumerate(keys):
        seen.setdefault(k, [i, i])[1] = i
    return [f for f, _ in seen.values()], [last for _, last in seen.values()]


keys_strategy = st.lists(
    st.sampled_from([bytes([i]) * (i % 19) for i in range(40)])
    | st.binary(min_size=0, max_size=30),
    min_size=0,
    max_size=300,
)


@settings(max_examples=200, deadline=None)
@given(keys_strategy)
def test_groups_equal_applying_the_records_in_order(keys: list[bytes]) -> None:
    buf, offsets, sizes = _records(keys)
    got = bulk._same_keys(buf, offsets, sizes)
    assert got is not None
    assert (got[0].tolist(), got[1].tolist()) == _expected(keys)


@settings(max_examples=100, deadline=None)
@given(keys_strategy, st.integers(0, 3))
def test_hashes_equal_in_their_high_bits_are_still_told_apart(
    keys: list[bytes], spread: int
) -> None:
    """Hashes made alike in every bit but a few low ones (where the sort carries the
    record's index): runs of equal high bits hold several keys, interleaved."""
    real = bulk.key_hashes

    def alike(buf: Any, offsets: Any, sizes: Any) -> Any:
        return real(buf, offsets, sizes) & np.uint64((1 << spread) - 1)

    buf, offsets, sizes = _records(keys)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bulk, "key_hashes", alike)
        got = bulk._same_keys(buf, offsets, sizes)
    distinct = len(set(keys))
    low_bits = {int(h) for h in alike(buf, offsets, sizes)}
    if len(low_bits) < distinct:  # two keys share a full hash: the streamed merge's case
        assert got is None
        return
    assert got is not None
    assert (got[0].tolist(), got[1].tolist()) == _expected(keys)


@settings(max_examples=100, deadline=None)
@given(keys_strategy)
def test_last_changes_keeps_each_keys_hash_in_ascending_order(keys: list[bytes]) -> None:
    """``last_changes`` hands the lookup the hashes it grouped by: ascending, one per kept
    key, ``hashes[i]`` that of row ``order[i]``; the rows are ``last_per_key``'s."""
    buf, offsets, sizes = _records(keys)
    values = np.zeros(len(keys), np.int64)
    records = bulk.Packed(buf, offsets, sizes, values, values - 1)  # every record a remove
    changes = bulk.last_changes(records)
    assert changes is not None
    kept = bulk.last_per_key(records, removes=True)
    assert kept is not None and changes.records.pairs() == kept.pairs()
    rows = changes.records
    hashes = bulk.key_hashes(rows.data, rows.key_offsets, rows.key_sizes)
    assert sorted(changes.order.tolist()) == list(range(len(rows)))
    assert changes.hashes.tolist() == hashes[changes.order].tolist()
    assert (np.diff(changes.hashes) > 0).all()
