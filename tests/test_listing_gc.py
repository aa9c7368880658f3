"""Checkpoint.open lists and classifies with the cyclic collector paused, then freezes large
listings out of its reach: listing stays linear in the number of files (issue 18, item 4).

The figures are in benchmarks/bench_listing.py; these tests check the collector's state, so
they fail if the pause or the freeze goes, without timing anything."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ckpt_cli.core.layout as layout
import ckpt_cli.core.model as model
import ckpt_cli.storage.core as core
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.errors import CheckpointNotFound
from ckpt_cli.storage import listing

CASE = Path(__file__).resolve().parent.parent / "fixtures" / "checkpoints" / "spark34-hdfs-agg"


@pytest.fixture
def collector() -> Iterator[None]:
    """Whatever a test does to the collector is undone after it."""
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """Whether the collector was enabled while listing and while classifying."""
    states: dict[str, bool] = {}
    list_local, classify = listing.list_local, layout.classify_listing

    def spy_list(*args: Any) -> Any:
        states["listing"] = gc.isenabled()
        return list_local(*args)

    def spy_classify(*args: Any) -> Any:
        states["classifying"] = gc.isenabled()
        return classify(*args)

    monkeypatch.setattr(core, "list_local", spy_list)
    monkeypatch.setattr(model, "classify_listing", spy_classify)
    return states


def test_paused_while_listing_and_classifying_then_restored(
    collector: None, seen: dict[str, bool]
) -> None:
    gc.enable()
    ckpt = Checkpoint.open(str(CASE / "checkpoint"))
    assert ckpt.files
    assert seen == {"listing": False, "classifying": False}
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled(
    collector: None, seen: dict[str, bool]
) -> None:
    gc.disable()
    Checkpoint.open(str(CASE / "checkpoint"))
    assert seen == {"listing": False, "classifying": False}
    assert not gc.isenabled()


def test_restored_when_the_listing_fails(collector: None, tmp_path: Path) -> None:
    gc.enable()
    with pytest.raises(CheckpointNotFound):
        Checkpoint.open(str(tmp_path / "missing"))
    assert gc.isenabled()


def test_large_listings_are_frozen_small_ones_not(
    collector: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    gc.unfreeze()
    small = Checkpoint.open(str(CASE / "checkpoint"))
    assert len(small.files) < listing.FREEZE_FROM_FILES
    assert gc.get_freeze_count() == 0

    # The same checkpoint counted as large: its files (and all alive) leave the collector.
    monkeypatch.setattr(listing, "FREEZE_FROM_FILES", len(small.files))
    large = Checkpoint.open(str(CASE / "checkpoint"))
    frozen = gc.get_freeze_count()
    assert frozen >= len(large.files)
    tracked = {id(o) for o in gc.get_objects()}
    assert not tracked & {id(f) for f in large.files}  # frozen: no generation holds them
    assert gc.isenabled()


@pytest.fixture
def eager() -> Iterator[list[int]]:
    """A collector that would run a pass every allocation or so; the generations of the
    passes it ran."""
    passes: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            passes.append(info["generation"])

    thresholds = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    gc.callbacks.append(count)
    yield passes
    gc.callbacks.remove(count)
    gc.set_threshold(*thresholds)


def test_the_model_is_built_with_the_collector_paused(
    collector: None, eager: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``operators`` is built lazily, after ``open``'s pause: it pauses the collector itself
    (no pass while it builds, gen 2 included, however eager), then restores it."""
    gc.enable()
    ckpt = Checkpoint.open(str(CASE / "checkpoint"))
    states: list[tuple[bool, int]] = []  # per store directory: enabled?, passes so far
    partition_of = model._partition_of

    def spy(*args: Any) -> Any:
        states.append((gc.isenabled(), len(eager)))
        return partition_of(*args)

    monkeypatch.setattr(model, "_partition_of", spy)
    assert ckpt.operators
    assert len(states) > 1 and not any(enabled for enabled, _ in states)
    assert len({passes for _, passes in states}) == 1  # no pass between the first and last
    assert gc.isenabled()
