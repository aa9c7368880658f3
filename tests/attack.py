"""A seeded attack kit: damage a copy of a real fixture at random and run every command on it.

Shared by ``tests/test_attack_sweep.py`` (a few seeded runs) and ``scripts/attack.py``
(hundreds, by hand). A run fails when a command crashes, exits outside {0, 1, 2}, prints
more than one error line, takes 30 s, writes invalid ``--json``, when ``validate --deep``
says ok although a file's bytes no longer match its checksum sidecar, or when the headline's
``restartable`` is not ``validate``'s verdict.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ckpt_cli.core.model import Checkpoint
from ckpt_cli.errors import CkptError
from tests.conftest import CASES, Case, CliResult, replay_args, run_cli

TIME_LIMIT_S = 30.0


@dataclass
class Damage:
    name: str
    target: Path
    # True when bytes of a file with a checksum sidecar changed and the sidecar did not.
    breaks_checksum: bool = False


@dataclass
class Failure:
    seed: int
    case: str
    damage: str
    target: str
    command: list[str]
    problem: str
    output: str = ""

    def __str__(self) -> str:
        return (
            f"seed={self.seed} case={self.case} damage={self.damage} target={self.target}\n"
            f"  ckpt {' '.join(self.command)}\n  {self.problem}\n  {self.output[:600]}"
        )


@dataclass
class Outcome:
    runs: int = 0
    failures: list[Failure] = field(default_factory=list)
    slowest: float = 0.0


def _sidecars(path: Path) -> list[Path]:
    return [
        p
        for p in (path.parent / f".{path.name}.crc", path.parent / f"{path.name}.crc")
        if p.is_file() and p != path
    ]


def _data_files(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and not p.name.endswith(".crc")
    )


def _version_of(path: Path) -> int | None:
    stem = path.name.split(".", 1)[0]
    return int(stem) if stem.isdigit() else None


def _changed(path: Path, before: bytes | None) -> bool:
    after = path.read_bytes() if path.is_file() else None
    return before is not None and after is not None and after != before


def damage(root: Path, rng: random.Random, outside: Path) -> Damage:
    """Apply one random damage to the checkpoint copy at ``root``."""
    files = _data_files(root)
    target = rng.choice(files)
    original = target.read_bytes()
    # None once the damage moved or replaced the target (no checksum claim then).
    before: bytes | None = original
    kinds: list[str] = [
        "truncate",
        "flip",
        "delete",
        "empty",
        "nested_json",
        "garbage",
        "version_header",
        "duplicate_version",
        "extra_sst",
        "swap_partitions",
        "symlink_dir",
        "symlink_file",
        "append",
        "crc_flip",
        "symlink_loop",
    ]
    kind = rng.choice(kinds)
    if kind == "truncate" and original:
        target.write_bytes(original[: rng.randrange(len(original))])
    elif kind == "flip" and original:
        data = bytearray(original)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(data))
            data[i] ^= rng.randint(1, 255)
        target.write_bytes(bytes(data))
    elif kind == "delete":
        target.unlink()
    elif kind == "empty":
        target.write_bytes(b"")
    elif kind == "nested_json":
        target.write_bytes(b"v1\n" + b"[" * 100_000 + b"\n")
    elif kind == "garbage":
        target.write_bytes(rng.randbytes(rng.randint(1, 300)))
    elif kind == "version_header":
        lines = original.split(b"\n", 1)
        target.write_bytes(b"v9\n" + (lines[1] if len(lines) > 1 else b""))
    elif kind == "append":
        target.write_bytes(original + rng.randbytes(rng.randint(1, 64)))
    elif kind == "symlink_loop":
        target.unlink()
        target.symlink_to(target)
        before = None
    elif kind == "crc_flip":
        crcs = _sidecars(target)
        if crcs:
            target = rng.choice(crcs)
            data = bytearray(target.read_bytes())
            if data:
                data[rng.randrange(len(data))] ^= 0xFF
                target.write_bytes(bytes(data))
            before = None
    elif kind == "duplicate_version":
        v = _version_of(target)
        if v is not None:
            other = target.with_name(
                str(v + rng.choice([-2, -1, 1, 5])) + target.name[len(str(v)) :]
            )
            if rng.random() < 0.5:
                shutil.copyfile(target, other)
            else:
                target.rename(other)
            target = other
            before = None
    elif kind == "extra_sst":
        ssts = [p for p in files if p.suffix == ".sst"]
        if ssts:
            src = rng.choice(ssts)
            target = src.with_name(f"{rng.randint(1, 999999):06d}.sst")
            shutil.copyfile(src, target)
            before = None
    elif kind == "swap_partitions":
        parts = sorted({p.parent for p in files if p.parent.name.isdigit() and "state" in p.parts})
        if len(parts) >= 2:
            a, b = rng.sample(parts, 2)
            tmp = a.with_name(a.name + ".swap")
            a.rename(tmp)
            b.rename(a)
            tmp.rename(b)
            target = a
            before = None
    elif kind == "symlink_dir":
        dirs = sorted({p.parent for p in files} - {root})
        if dirs:
            d = rng.choice(dirs)
            (outside / "dir").mkdir(exist_ok=True)
            shutil.copytree(d, outside / "dir" / d.name, dirs_exist_ok=True)
            shutil.rmtree(d)
            d.symlink_to(outside / "dir" / d.name, target_is_directory=True)
            target = d
            before = None
    elif kind == "symlink_file":
        shutil.copyfile(target, outside / target.name)
        target.unlink()
        target.symlink_to(outside / target.name)
        before = None
    broke = before is not None and bool(_sidecars(target)) and _changed(target, before)
    return Damage(kind, target, broke)


def _check(
    fail: Callable[[list[str], str, CliResult | None], None], args: list[str], is_json: bool
) -> CliResult | None:
    start = time.monotonic()
    try:
        result = run_cli(*args)
    except BaseException as e:  # noqa: BLE001 - any escape from the CLI is the finding
        fail(args, f"raised {type(e).__name__}: {e}", None)
        return None
    elapsed = time.monotonic() - start
    _check.slowest = max(getattr(_check, "slowest", 0.0), elapsed)  # type: ignore[attr-defined]
    out = result.stdout + result.stderr
    if result.exit_code not in (0, 1, 2):
        fail(args, f"exit code {result.exit_code}", result)
    if "internal error" in out.lower() or "Traceback" in out:
        fail(args, "internal error / traceback", result)
    if elapsed > TIME_LIMIT_S:
        fail(args, f"took {elapsed:.1f}s", result)
    if result.exit_code == 2:
        err = [ln for ln in result.stderr.splitlines() if ln.strip()]
        if not err or len(err) > 2:
            fail(args, f"exit 2 with {len(err)} stderr lines", result)
    if is_json and result.exit_code != 2:
        try:
            json.loads(result.stdout)
        except ValueError:
            fail(args, "--json stdout is not JSON", result)
    return result


def attack_once(case: Case, seed: int, work: Path) -> Outcome:
    """Damage a copy of ``case`` with ``seed`` and run every command on it."""
    rng = random.Random(f"{case.name}:{seed}")
    run_dir = work / f"{case.name}-{seed}"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    outside = run_dir / "outside"
    outside.mkdir(parents=True)
    root = run_dir / "checkpoint"
    shutil.copytree(case.checkpoint, root, symlinks=True)
    hurt = damage(root, rng, outside)
    outside_before = {p: p.stat().st_mtime_ns for p in outside.rglob("*")}
    outcome = Outcome()

    def fail(args: list[str], problem: str, result: CliResult | None) -> None:
        out = (result.stdout[-300:] + "\n" + result.stderr[-300:]) if result else ""
        rel = str(hurt.target.relative_to(root)) if hurt.target.is_relative_to(root) else ""
        outcome.failures.append(Failure(seed, case.name, hurt.name, rel, args, problem, out))

    ck = str(root)
    commands: list[tuple[list[str], bool]] = [
        (["versions", ck], False),
        (["versions", ck, "--json"], True),
        (["validate", ck], False),
        (["validate", ck, "--json"], True),
        (["validate", ck, "--all-versions", "--json"], True),
        (["orphans", ck, "--json"], True),
        (["cleanup", ck, "--min-age", "0s", "--force", "--json"], True),
        (["repair", ck, "--json"], True),
    ]
    if hurt.target.exists() or hurt.target.is_symlink():
        commands.append((["inspect", str(hurt.target), "-c", ck, "--json"], True))
        commands.append((["inspect", str(hurt.target), "-c", ck], False))
    results: dict[str, CliResult | None] = {}
    for args, is_json in commands:
        results[" ".join(args[:1] + args[2:])] = _check(fail, args, is_json)
        outcome.runs += 1
    # One verdict: the headline's restartable is validate's default scope's.
    head, verdict = results.get("versions --json"), results.get("validate --json")
    if head and verdict and head.exit_code == 0 and verdict.exit_code in (0, 1):
        restartable = head.json()["headline"]["restartable"]
        if restartable is not (verdict.exit_code == 0):
            fail(["versions", ck, "--json"], f"restartable={restartable}, validate disagrees", head)
    deep = _check(fail, ["validate", ck, "--deep", "--json"], True)
    outcome.runs += 1
    rel = hurt.target.relative_to(root).as_posix()
    # Ok is allowed only when a finding names the file (one Spark no longer reads, e.g. a
    # source log entry before the newest .compact, is a warning, not an error).
    if hurt.breaks_checksum and deep is not None and deep.exit_code == 0 and rel not in deep.stdout:
        fail(["validate", ck, "--deep", "--json"], "ok although a checksum no longer matches", deep)
    versions = run_cli("versions", ck, "--json")
    if versions.exit_code == 0:
        data = versions.json()
        batch = data["batches"].get("latest_committed")
        for op in data.get("operators") or []:
            for store in op.get("stores") or []:
                for base in _replays(ck, op["id"], store["name"]):
                    for extra in (["--format", "jsonl"], ["--changes", "--format", "jsonl"]):
                        args = base + extra
                        if batch is not None and "--changes" not in extra:
                            args += ["--batch", str(batch)]
                        _check(fail, args, False)
                        outcome.runs += 1
    # Destructive commands last: whatever the damage, nothing outside the checkpoint changes.
    for args in (
        ["cleanup", ck, "--apply", "--yes", "--force", "--min-age", "0s", "--json"],
        ["repair", ck, "--apply", "--yes", "--force", "--min-age", "0s", "--json"],
    ):
        _check(fail, args, True)
        outcome.runs += 1
    for p, mtime in outside_before.items():
        if not p.exists() or p.stat().st_mtime_ns != mtime:
            fail(["(any)"], f"touched outside the checkpoint: {p}", None)
    outcome.slowest = getattr(_check, "slowest", 0.0)
    shutil.rmtree(run_dir, ignore_errors=True)
    return outcome


def _replays(ck: str, operator: int, store: str) -> list[list[str]]:
    """``replay`` of a store; of a store with several column families, one per state
    variable, the timers, or each join family (as Spark must be asked)."""
    base = ["--operator", str(operator), "--store", store]
    try:
        found = replay_args(Checkpoint.open(ck), operator, store)
    except CkptError:
        found = [base]  # the damage hides the families: the plain replay must fail cleanly
    return [["replay", ck, *args] for args in found]


def sweep(seeds: range, work: Path, cases: list[Case] | None = None) -> Outcome:
    total = Outcome()
    for seed in seeds:
        for case in cases or CASES:
            one = attack_once(case, seed, work)
            total.runs += one.runs
            total.failures += one.failures
            total.slowest = max(total.slowest, one.slowest)
    return total
