"""Where each record of a decompressed HDFS-store file or V1/V3 changelog starts, found in
bulk with numpy (``records`` reads the same records one at a time, and names what is wrong).

A record is ``int32 BE keySize | key | int32 BE valueSize | value`` (valueSize -1: a remove),
and each one starts where the previous one ends: finding the starts is a walk. ``frame``
walks in bulk instead of a Python step per record:

* a run of records of one key and value size (fixed-width UnsafeRows) is guessed ahead,
  ``8 + k + v`` bytes apart, and kept up to the first record whose sizes differ;
* runs broken often by records of one other size (a snapshot in hash order whose string
  keys are one word shorter in 1% of rows) are followed by slot: both sizes' records are
  whole multiples of ``unit = gcd(stride, other_stride)``, so every later record starts at
  ``pos + unit * slot``; which slots could start a record of either size is read for a block
  at once, and Python steps only from one record of the other size to the next;
* records whose sizes vary from one to the next are walked, a stretch at a time.

Few, large numpy calls matter beyond the arithmetic: replay frames partitions in threads,
and each numpy call gives up and takes back the GIL.
"""

from __future__ import annotations

import array
import math
import struct
from typing import Any

from ckpt_cli.formats.records import MAX_RECORD_BYTES

_INT = struct.Struct(">i")

# Records a run of one size is guessed ahead by (doubling while the guesses hold); records
# walked one at a time where sizes vary: two at first, doubling while guesses keep failing.
_GUESS, _GUESS_MAX, _WALK, _WALK_MAX = 64, 1 << 16, 2, 1 << 12
# Slots whose record sizes are read at once where records have one of two sizes: a block
# this many at first, doubling while the two sizes go on.
_BLOCK_SLOTS_MIN, _BLOCK_SLOTS_MAX = 1 << 13, 1 << 18
# Runs at least this long between records of other sizes are guessed, not followed by slot.
_LONG_RUN = 512


def frame(data: bytes | bytearray, snapshot: bool, start: int = 0) -> Any:
    """``(starts, key_sizes, value_sizes)`` (int64, int32, int32 arrays) of the records from offset
    ``start`` of one decompressed file (a delta, a snapshot, or a V1/V3 changelog after its
    header), or None when it does not end cleanly with its -1 end marker, or a size is out
    of bounds (the streamed reader then names the problem)."""
    import numpy as np

    starts = _starts(data, start)
    if starts is None:
        return None
    at = np.concatenate(starts) if starts else np.zeros(0, np.int64)
    key_sizes = read_ints(data, at)
    value_sizes = read_ints(data, at + 4 + key_sizes)
    bad = (key_sizes > MAX_RECORD_BYTES) | (value_sizes > MAX_RECORD_BYTES)
    bad |= value_sizes < (0 if snapshot else -1)
    ends = at + 8 + key_sizes + np.maximum(value_sizes, 0)
    if bool(bad.any()) or (len(ends) and int(ends[-1]) > len(data) - 4):
        return None
    return at, key_sizes, value_sizes


def read_ints(data: bytes | bytearray, at: Any) -> Any:
    """Big-endian int32s at the byte offsets ``at``, as native int32 (half the memory of
    int64 for a size per record; sums and offsets computed from them are int64)."""
    return _ints(data)[at].astype("int32")


def _ints(data: bytes | bytearray) -> Any:
    """A big-endian int32 view starting at every byte of ``data``."""
    import numpy as np

    return np.ndarray((max(0, len(data) - 3),), ">i4", buffer=data, strides=(1,))


def _starts(data: bytes | bytearray, pos: int) -> list[Any] | None:
    """The record starts from ``pos`` to the end marker (arrays, in order), or None when the
    data ends first or the marker is not -1."""
    import numpy as np

    ints = _ints(data)
    unpack = _INT.unpack_from
    found: list[Any] = []
    guess, walk = _GUESS, _WALK
    length = 0  # records of the current run found by earlier guesses
    try:
        while True:
            (key_size,) = unpack(data, pos)
            if key_size < 0:
                break
            (value_size,) = unpack(data, pos + 4 + key_size)
            stride = 8 + key_size + max(value_size, 0)
            # Guesses whose two sizes lie inside the data.
            count = min(guess, (len(data) - 8 - key_size - pos) // stride + 1)
            at = pos + stride * np.arange(count, dtype=np.int64)
            same = (ints[at] == key_size) & (ints[at + 4 + key_size] == value_size)
            run = count if bool(same.all()) else int(np.argmin(same))
            found.append(at[:run])
            pos += stride * run
            if run == count:
                guess = min(guess * 2, _GUESS_MAX)
                length += run
                continue
            length, run = 0, length + run
            if run >= _LONG_RUN:  # a long run broken by a record of other sizes
                # Step over that record, and guess on about as far as runs go.
                guess = max(_GUESS, min(guess, 2 * run))
                (key_size,) = unpack(data, pos)
                if key_size >= 0:
                    (value_size,) = unpack(data, pos + 4 + key_size)
                    found.append(np.array([pos], np.int64))
                    pos += 8 + key_size + max(value_size, 0)
                continue
            guess = _GUESS
            if run >= 8:  # runs broken often by records of other sizes: follow both sizes
                walk = _WALK
                pos = _two_sizes(data, pos, key_size, value_size, found)
                continue
            # Sizes vary: a stretch one at a time costs less than guessing.
            walked = array.array("q")  # 8 bytes a record, not a Python int's 36
            for _ in range(walk):
                (key_size,) = unpack(data, pos)
                if key_size < 0:
                    break
                (value_size,) = unpack(data, pos + 4 + key_size)
                walked.append(pos)
                pos += 8 + key_size + max(value_size, 0)
            if walked:
                found.append(np.frombuffer(walked, np.int64))
            walk = min(walk * 2, _WALK_MAX)
    except struct.error:
        return None  # truncated
    return found if key_size == -1 else None


def _two_sizes(
    data: bytes | bytearray, pos: int, key_size: int, value_size: int, found: list[Any]
) -> int:
    """Appends to ``found`` the starts of the records from ``pos`` (one whose sizes are not
    ``key_size``/``value_size``, which the records before it had) for as long as every
    record has one of the two sizes, and returns where the next record starts (``pos``
    itself when the record there cannot be read whole: the caller then walks).

    Both sizes' records are a multiple of ``unit`` bytes long, so every record ahead starts
    at ``pos + unit * slot``. Which sizes a record at each slot would have is read for a
    block of slots at once, through strided views (no gather); then runs of the usual size
    are skipped in one step each (per slot, the first slot at which a run through it
    breaks), and Python steps only at records of the other size."""
    import numpy as np

    n = len(data)
    if pos + 8 > n:
        return pos
    (other_key,) = _INT.unpack_from(data, pos)
    if other_key < 0 or pos + 8 + other_key > n:
        return pos
    (other_value,) = _INT.unpack_from(data, pos + 4 + other_key)
    stride = 8 + key_size + max(value_size, 0)
    other_stride = 8 + other_key + max(other_value, 0)
    unit = math.gcd(stride, other_stride)
    step, other_step = stride // unit, other_stride // unit
    reach = 8 + max(key_size, other_key)  # bytes read from a slot: both sizes' two ints
    block = _BLOCK_SLOTS_MIN
    while True:
        # Slots of this block: whole multiples of ``step``, every read inside the data.
        slots = min(block, (n - reach - pos) // unit + 1) // step * step
        block = min(block * 2, _BLOCK_SLOTS_MAX)
        if slots <= 0:
            return pos
        usual = _sized(data, pos, unit, slots, key_size, value_size, stride)
        other = _sized(data, pos, unit, slots, other_key, other_value, other_stride)
        # breaks[r, c]: the first slot from r * step + c on, a step apart, whose record is
        # not of the usual sizes (past the block when there is none).
        rows = slots // step
        breaks = np.where(usual, np.int32(slots + step), np.arange(slots, dtype=np.int32))
        breaks = breaks.reshape(rows, step)
        past = np.arange(slots, slots + step, dtype=np.int32)
        breaks = np.minimum.accumulate(np.vstack([breaks, past])[::-1], axis=0)[::-1]
        next_break = breaks.ravel().data  # a memoryview: Python ints on indexing
        is_usual, is_other = memoryview(usual), memoryview(other)
        runs: list[int] = []  # first slot and end slot (exclusive) of runs of usual size
        singles: list[int] = []  # slots of records of the other size
        slot, handback = 0, False
        while slot < slots and not handback:
            if is_usual[slot]:
                end = next_break[slot]
                runs += (slot, end)
                # A long run: guessing finds the rest of it for less.
                handback = end - slot >= _LONG_RUN * step
                slot = end
            elif is_other[slot]:
                singles.append(slot)
                slot += other_step
                # The other size runs on: guessing takes it from here.
                handback = len(singles) >= 8 and singles[-8] == slot - 8 * other_step
            else:
                handback = True  # a record of neither size: the caller takes it
        found.append(pos + unit * _slots_of(runs, singles, step))
        pos += unit * slot
        if handback:
            return pos


def _slots_of(runs: list[int], singles: list[int], step: int) -> Any:
    """The slots of ``runs`` (first, end pairs; a record every ``step`` slots) and of
    ``singles``, in order."""
    import numpy as np

    spans = np.array(runs, np.int64).reshape(-1, 2)
    lengths = (spans[:, 1] - spans[:, 0]) // step
    first = np.repeat(np.cumsum(lengths) - lengths, lengths)
    slots = np.arange(int(lengths.sum()), dtype=np.int64) - first
    slots *= step
    slots += np.repeat(spans[:, 0], lengths)
    if singles:
        slots = np.sort(np.concatenate([slots, np.array(singles, np.int64)]))
    return slots


def _sized(
    data: bytes | bytearray,
    pos: int,
    unit: int,
    slots: int,
    key_size: int,
    value_size: int,
    stride: int,
) -> Any:
    """Per slot (``pos + unit * slot``), whether a record of sizes ``key_size``/``value_size``
    starts there and ends with room for the next record's key size (bools, one byte each)."""
    import numpy as np

    keys = np.ndarray((slots,), ">i4", buffer=data, offset=pos, strides=(unit,))
    values = np.ndarray((slots,), ">i4", buffer=data, offset=pos + 4 + key_size, strides=(unit,))
    hit = keys == key_size
    hit &= values == value_size
    whole = (len(data) - 4 - stride - pos) // unit + 1  # slots whose record ends in time
    if whole < slots:
        hit[max(whole, 0) :] = False
    return hit
