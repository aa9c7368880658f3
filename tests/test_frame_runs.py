"""``record_frames.frame`` finds the records of a decompressed file in bulk: the same record
starts, and the same refusals, as walking the records one at a time (the reference below),
on runs of fixed and varying sizes, runs broken by records of other sizes, removes,
truncations and a wrong end marker."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckpt_cli.formats import record_frames

np = pytest.importorskip("numpy")

_INT = struct.Struct(">i")


def _walk(data: bytes, start: int) -> list[int] | None:
    starts, pos = [], start
    try:
        while True:
            (key_size,) = _INT.unpack_from(data, pos)
            if key_size < 0:
                break
            (value_size,) = _INT.unpack_from(data, pos + 4 + key_size)
            starts.append(pos)
            pos += 8 + key_size + max(value_size, 0)
    except struct.error:
        return None
    return starts if key_size == -1 else None


# Records as (key size, value size): runs of one size, with removes (-1) among them.
sizes = st.tuples(st.sampled_from([0, 8, 16, 24, 3]), st.sampled_from([-1, 0, 8, 32, 5]))
runs = st.lists(st.tuples(sizes, st.integers(1, 200)), max_size=12)


def _records(layout: list[tuple[tuple[int, int], int]], seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    out = bytearray()
    for (key_size, value_size), repeat in layout:
        for _ in range(repeat):
            out += _INT.pack(key_size) + rng.bytes(key_size) + _INT.pack(value_size)
            out += rng.bytes(max(value_size, 0))
    return bytes(out)


@settings(max_examples=150, deadline=None)
@given(runs, st.integers(0, 2**32 - 1), st.sampled_from(["end", "cut", "bad-end", "none"]))
def test_frame_finds_what_a_walk_finds(
    layout: list[tuple[tuple[int, int], int]], seed: int, ending: str
) -> None:
    head = b"\x07" * 5  # records from an offset, as in a changelog
    data = head + _records(layout, seed)
    if ending == "end":
        data += _INT.pack(-1)
    elif ending == "bad-end":
        data += _INT.pack(-2)
    elif ending == "cut" and len(data) > len(head):
        data = data[: len(head) + (len(data) - len(head)) * 2 // 3]
    expected = _walk(data, len(head))
    framed = record_frames.frame(data, False, len(head))
    if expected is None:
        assert framed is None
        return
    assert framed is not None and framed[0].tolist() == expected


def test_long_runs_of_fixed_size_rows() -> None:
    layout = [((16, 32), 100_000), ((24, 32), 3), ((16, 32), 70_000)]
    data = _records(layout, 1) + _INT.pack(-1)
    framed = record_frames.frame(data, True)
    assert framed is not None and framed[0].tolist() == _walk(data, 0)
    assert len(framed[0]) == 170_003


def _sprinkled(
    seed: int, count: int, rate: float, usual: tuple[int, int], others: list[tuple[int, int]]
) -> bytes:
    """``count`` records of sizes ``usual``, each one of ``others`` instead with probability
    ``rate`` (a snapshot in hash order whose keys are a word shorter now and then)."""
    rng = np.random.default_rng(seed)
    out = bytearray()
    for _ in range(count):
        key_size, value_size = usual
        if rng.random() < rate:
            key_size, value_size = others[int(rng.integers(len(others)))]
        out += _INT.pack(key_size) + rng.bytes(key_size) + _INT.pack(value_size)
        out += rng.bytes(max(value_size, 0))
    return bytes(out)


@settings(max_examples=120, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 6000),
    st.sampled_from([0.0005, 0.01, 0.05, 0.3]),
    st.sampled_from([(24, 32), (16, -1), (8, 0), (5, 6)]),
    st.lists(
        st.sampled_from([(16, 32), (24, 24), (32, 32), (16, -1), (3, 5), (0, 0)]),
        min_size=1,
        max_size=3,
    ),
    st.sampled_from(["end", "cut", "bad-end", "zeros"]),
)
def test_runs_broken_by_records_of_other_sizes(
    seed: int,
    count: int,
    rate: float,
    usual: tuple[int, int],
    others: list[tuple[int, int]],
    ending: str,
) -> None:
    """The lattice (one other size among runs; several others send it back to the walk)
    finds what a walk finds, whatever the data's end: the end marker, a cut anywhere, a
    wrong marker, or zeros after the records (a record of key size 0 and value size 0)."""
    data = _sprinkled(seed, count, rate, usual, others)
    if ending == "end":
        data += _INT.pack(-1)
    elif ending == "bad-end":
        data += _INT.pack(-2)
    elif ending == "cut":
        data = data[: int(np.random.default_rng(seed).integers(len(data) + 1))]
    else:
        data += bytes(64) + _INT.pack(-1)
    expected = _walk(data, 0)
    framed = record_frames.frame(data, False)
    if expected is None:
        assert framed is None
        return
    assert framed is not None and framed[0].tolist() == expected
