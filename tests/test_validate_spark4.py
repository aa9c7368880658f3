"""``ckpt validate``'s checks of Spark 4.x state (``validate/spark4.py``): --deep names every
store it cannot decode, the one case Spark cannot restart, and the column family check on a
damaged copy. (No false alarm on every fixture: test_validate.)"""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ckpt_cli.core.model import Checkpoint
from ckpt_cli.errors import CkptError
from ckpt_cli.replay import read_state
from ckpt_cli.state.reader import covering_reads
from ckpt_cli.validate import validate
from ckpt_cli.validate.codes import (
    ERROR,
    FMGWS_V1_SNAPSHOT,
    INFO,
    ROWS_NOT_DECODED,
    SCHEMA_FAMILY_MISMATCH,
)
from tests.conftest import CANNOT_RESTART, CASES_DIR, Case, case_params, run_cli

# mode -> (all_versions, deep)
MODES = {"restart": (False, False), "all-versions": (True, False), "deep": (False, True)}
(NO_RESTART,) = CANNOT_RESTART


@pytest.mark.parametrize("case", case_params())
def test_deep_says_which_rows_it_cannot_decode(case: Case) -> None:
    """Every store either replays in full, or --deep names it; never a silent OK."""
    ckpt = Checkpoint.open(str(case.checkpoint))
    report = validate(ckpt, deep=True)
    noted = {
        (f.details["operator"], f.details["store"])
        for f in report.findings
        if f.code == ROWS_NOT_DECODED and f.severity == INFO
    }
    for op in ckpt.operators.values():
        for store in op.stores:
            try:
                # A state variable or join family at a time, as Spark reads them.
                for options in covering_reads(ckpt, op.id):
                    for _ in read_state(ckpt, operator=op.id, **{"store": store, **options}):
                        pass
                decoded = True
            except CkptError:
                decoded = False
            assert ((op.id, store) in noted) is not decoded, (op.id, store)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_fmgws_state_format_1_cannot_restart(mode: str) -> None:
    report = validate(
        Checkpoint.open(str(CASES_DIR / NO_RESTART / "checkpoint")),
        all_versions=MODES[mode][0],
        deep=MODES[mode][1],
    )
    (finding,) = report.findings
    assert (finding.code, finding.severity) == (FMGWS_V1_SNAPSHOT, ERROR)
    assert sorted(finding.paths) == [f"state/0/{p}/{v}.snapshot" for p in (0, 1) for v in (12, 9)]
    assert not report.ok


def test_fmgws_state_format_1_exit_code() -> None:
    result = run_cli("validate", str(CASES_DIR / NO_RESTART / "checkpoint"))
    assert result.exit_code != 0
    assert FMGWS_V1_SNAPSHOT in result.stdout


def _rename_family(zip_path: Path, old: str, new: str) -> None:
    """Rewrite a RocksDB zip with one column family renamed in its metadata."""
    out = io.BytesIO()
    with zipfile.ZipFile(zip_path) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "metadata":
                header, body = data.decode().split("\n", 1)
                meta = json.loads(body)
                mapping = meta["columnFamilyMapping"]
                assert old in mapping
                mapping[new] = mapping.pop(old)
                data = f"{header}\n{json.dumps(meta)}".encode()
            dst.writestr(info, data)
    zip_path.write_bytes(out.getvalue())
    zip_path.with_name(f".{zip_path.name}.crc").unlink(missing_ok=True)


def _copy_with_renamed_family(
    tmp_path: Path, case: str, partition: int, pick: Callable[..., Path], old: str, new: str
) -> tuple[Path, Path]:
    """A copy of ``case`` whose zip chosen by ``pick`` (min/max version) has a family renamed."""
    root = tmp_path / "ckpt"
    shutil.copytree(CASES_DIR / case / "checkpoint", root)
    zip_path = pick((root / f"state/0/{partition}").glob("*.zip"), key=lambda p: int(p.stem))
    _rename_family(zip_path, old, new)
    return root, zip_path


def test_family_missing_from_schema_is_found(tmp_path: Path) -> None:
    root, newest = _copy_with_renamed_family(
        tmp_path, "spark4-tws-row", 0, max, "buckets", "buckets2"
    )
    report = validate(Checkpoint.open(str(root)))
    found = [f for f in report.findings if f.code == SCHEMA_FAMILY_MISMATCH]
    # Both ways: the zip's new name is not in the schema, the schema's "buckets" not in the zip.
    assert len(found) == 2, report.findings
    zip_rel = f"state/0/0/{newest.name}"
    assert found[0].message.startswith(f"{zip_rel}: column families buckets2 are not in ")
    schema_rel = found[0].paths[1]
    assert schema_rel.startswith("state/0/_stateSchema/default/")
    assert found[1].message.startswith(
        f"{schema_rel}: column families buckets are not in {zip_rel}"
    )
    # Which batch's schema it is, and by which operator metadata.
    assert "(the schema of batch " in found[1].message and "_metadata/v2/" in found[1].message


def test_family_check_reads_every_retained_zip(tmp_path: Path) -> None:
    root, _ = _copy_with_renamed_family(
        tmp_path, "spark4-join-v4-rocksdb", 1, min, "left-tsWithKey", "left-tsWithKeys"
    )
    restart = validate(Checkpoint.open(str(root)))
    every = validate(Checkpoint.open(str(root)), all_versions=True)
    assert SCHEMA_FAMILY_MISMATCH not in {f.code for f in restart.findings}
    assert SCHEMA_FAMILY_MISMATCH in {f.code for f in every.findings}
