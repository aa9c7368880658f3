"""The attack kit, bounded: every real fixture damaged at random (seeded) and every command
run on it in-process. ``scripts/attack.py`` runs the same kit with many more seeds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.attack import attack_once
from tests.conftest import Case, case_params

SEEDS = (0, 1)


@pytest.mark.parametrize("case", case_params())
def test_random_damage_never_crashes_or_passes_a_broken_checksum(
    case: Case, tmp_path: Path
) -> None:
    failures = []
    for seed in SEEDS:
        failures += attack_once(case, seed, tmp_path).failures
    assert not failures, "\n".join(str(f) for f in failures)
