"""ZIP_METADATA_V2's verdict for Spark 4.2+ against a live Spark 4.3 restart.

Copies of the Spark 4.0.5 checkpoints of ``fixtures/v2upgrade/`` (one scripted: a changelog
the repair would replay removed) are restarted by this venv's PySpark 4.3 with one more input
file: the query restarts exactly where ckpt says 4.2+ restarts, emits what Spark 4.0.5 (the
control) emitted, and, after an upgrade, ckpt still says it restarts and it does.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, run_cli
from tests.spark_support import spark  # noqa: F401 - the session fixture

pytestmark = pytest.mark.slow

V2UPGRADE = REPO / "fixtures" / "v2upgrade"
RESULTS: dict[str, Any] = (
    json.loads((V2UPGRADE / "results.json").read_text())["shapes"]
    if (V2UPGRADE / "results.json").is_file()
    else {}
)


def _probe() -> Any:
    spec = importlib.util.spec_from_file_location(
        "probe_v2_upgrade", REPO / "fixtures/probe_v2_upgrade.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["probe_v2_upgrade"] = module
    spec.loader.exec_module(module)
    return module


PROBE = _probe()


def verdict(root: Path, *args: str) -> str:
    """What ckpt says a Spark 4.2+ restart does."""
    result = run_cli("validate", str(root), "--json", *args)
    assert result.exit_code in (0, 1), result.stderr
    found = [f for f in result.json()["findings"] if f["code"] == "ZIP_METADATA_V2"]
    return str(found[0]["upgrade"]["4.2+"]) if found else "restarts"


def input_dir_of(root: Path) -> Path:
    """Where the file source read its input (the source log records the paths)."""
    line = (root / "sources/0/0").read_text().splitlines()[1]
    return Path(json.loads(line)["path"].removeprefix("file://")).parent


def restart(
    session: Any, name: str, root: Path, step: int, batch: int | None = None
) -> tuple[bool, list[Any]]:
    """Restart the shape's query on ``root`` with input step ``step`` added; whether it ran,
    and what batch ``batch`` (default: ``step``, the one that reads it) emitted."""
    shape = PROBE.SHAPES_BY_NAME[name]
    spec = shape.spec()
    input_dir = input_dir_of(root)
    for sub, rows in PROBE.gen.input_files(spec, step).items():
        PROBE.gen.write_input(input_dir / sub if sub else input_dir, step, rows)
    emitted: dict[int, list[Any]] = {}

    def collect(batch: Any, batch_id: int) -> None:
        emitted[batch_id] = sorted(
            (PROBE.gen.to_json_value(r.asDict(recursive=True)) for r in batch.collect()),
            key=lambda r: json.dumps(r, sort_keys=True),
        )

    for key, value in shape.confs().items():
        session.conf.set(key, value)
    try:
        query = (
            PROBE.gen.build_stream(session, spec, input_dir)
            .writeStream.foreachBatch(collect)
            .outputMode(PROBE.gen.output_mode(spec))
            .option("checkpointLocation", str(root))
            .start()
        )
        try:
            query.processAllAvailable()
            ok = True
        except Exception:  # noqa: BLE001 - a failed restart is the result
            ok = False
        finally:
            query.stop()
    finally:
        for key in shape.confs():
            session.conf.unset(key)
    return ok, emitted.get(step if batch is None else batch, [])


@pytest.fixture
def shape_copy(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A copy of a shape's checkpoint, its input where its source log says it was read."""
    name = request.param
    root = tmp_path / name
    shutil.copytree(V2UPGRADE / name / "checkpoint", root)
    input_dir = input_dir_of(root)
    if input_dir.exists():
        shutil.rmtree(input_dir)
    shutil.copytree(V2UPGRADE / name / "input", input_dir)
    try:
        yield name, root
    finally:
        shutil.rmtree(input_dir, ignore_errors=True)


def control_emitted(name: str) -> list[Any]:
    run = RESULTS[name]["restarts"]["4.0"]["restart"]
    rows: list[Any] = run["emitted"][str(RESULTS[name]["restart_version"])]
    return rows


@pytest.mark.parametrize("shape_copy", ["zip-short", "zip-full"], indirect=True)
def test_spark43_restarts_where_ckpt_says_it_does(spark: Any, shape_copy: Any) -> None:  # noqa: F811
    name, root = shape_copy
    said = verdict(root)
    step = RESULTS[name]["restart_version"]
    ok, rows = restart(spark, name, root, step)
    assert ok == (said == "restarts"), (name, said)
    if not ok:
        return
    assert rows == control_emitted(name)
    # After the upgrade restart: still a restart on 4.2+, and Spark agrees.
    assert verdict(root) == "restarts"
    ok, _ = restart(spark, name, root, step + 1)
    assert ok
    # The v2 zips are still in the checkpoint (Spark 4.3 writes v1 zips after them).
    assert list(root.glob("state/0/0/2_*.zip"))
    assert verdict(root, "--all-versions") == "restarts"


@pytest.mark.parametrize("shape_copy", ["zip-full"], indirect=True)
def test_spark43_fails_without_a_changelog_to_replay(spark: Any, shape_copy: Any) -> None:  # noqa: F811
    """zip-full without changelog 3 of partition 1: the repair walks the lineage (it reads
    the lineage lines of 6, 4, 2 only) and fails replaying version 3, as ckpt says."""
    name, root = shape_copy
    (gone,) = root.glob("state/0/1/3_*.changelog")
    gone.unlink()
    (gone.parent / f".{gone.name}.crc").unlink(missing_ok=True)
    assert verdict(root) == "fails"
    ok, _ = restart(spark, name, root, RESULTS[name]["restart_version"])
    assert not ok


@pytest.mark.parametrize("shape_copy", ["zip-short", "no-changelog"], indirect=True)
def test_spark43_restarts_after_convert_rewrites_the_v2_zips(
    spark: Any,  # noqa: F811
    shape_copy: Any,
) -> None:
    """Where 4.2+ fail (ZIP_METADATA_V2 says so), ``ckpt convert --format-version 2``
    rewrites the zips with v1 metadata: 4.3 restarts and emits what Spark 4.0.5 emitted on
    the untouched checkpoint (one batch later: the conversion is a batch)."""
    name, root = shape_copy
    assert verdict(root) == "fails"
    converted = run_cli("convert", str(root), "--format-version", "2", "--apply", "--yes")
    assert converted.exit_code == 0, converted.stdout + converted.stderr
    assert verdict(root) == "restarts"
    step = RESULTS[name]["restart_version"]
    ok, rows = restart(spark, name, root, step, batch=step + 1)
    assert ok
    assert rows == control_emitted(name)
