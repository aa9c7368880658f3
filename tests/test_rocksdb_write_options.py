"""``build_rocksdb_checkpoint``'s options are typed (``VersionOptions``): strict mypy names a
misspelled option, which ``**options: Any`` let through to a runtime error."""

from __future__ import annotations

from pathlib import Path

import pytest

SNIPPET = """\
from ckpt_cli.formats.rocksdb_write import VersionOptions, build_rocksdb_checkpoint

build_rocksdb_checkpoint([], 1, VersionOptions(unique_id="a", now_ms=1))
build_rocksdb_checkpoint([], 1, VersionOptions(uniqe_id="a"))
"""


def test_mypy_names_a_misspelled_option(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    source = tmp_path / "caller.py"
    source.write_text(SNIPPET)
    cache = str(tmp_path / "cache")
    out, _, code = api.run(
        ["--strict", "--follow-imports=silent", "--cache-dir", cache, str(source)]
    )
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert code == 1 and len(errors) == 1, out
    assert "caller.py:4:" in errors[0] and '"uniqe_id"' in errors[0]
