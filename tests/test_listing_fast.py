"""The fast paths of listing and the model (issue 18, item 4: `versions` on 176k files) give
what the plain ways give: the per-name classification cache, the files-by-kind index, the
listing's search-then-index lookups, the per-directory stat, the versions report's partition
figures, and the CLI importing only the command it runs."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from ckpt_cli.core.layout import classify, classify_listing
from ckpt_cli.core.model import Checkpoint, FileKind
from ckpt_cli.storage import FileEntry, Listing, StorageStats
from ckpt_cli.storage.listing import _SEARCHES_BEFORE_INDEX, list_local
from ckpt_cli.versions import describe_versions
from tests.conftest import CASES, Case, case_params

UUID = "0b5f8a3c-1d2e-4f60-8a9b-0c1d2e3f4a5b"
TRICKY = [
    ".ckpt-lock",
    "state/0/0/.ckpt-lock",  # ckpt's lock only at the root
    "metadata",
    "state/0/metadata",
    "offsets/3",
    "commits/3",
    "offsets/.3.crc",
    f"offsets/.3.{UUID}.tmp",
    "sources/0/7",
    "sources/0/9.compact",
    "state/0/_metadata/metadata",
    "state/0/_stateSchema/default/0_x",
    "state/0/0/1.delta",
    "state/0/0/1.DELTA",
    "state/0/0/.1.delta.crc",
    "state/0/0/2.snapshot",
    f"state/0/0/3_{UUID}.zip",
    f"state/0/0/3_{UUID}.zip.crc",
    "state/0/0/3.changelog",
    "state/0/0/SSTs/a.sst",
    "state/0/0/logs/a.log",
    "state/0/0/_metadata/schema",
    "state/0/1/left-keyToNumValues/1.delta",  # the same name in another store
    "state/0/1/left-keyToNumValues/SSTs/1.delta",
    "state/0/x/1.delta",
    "1.delta",
]


def _entries(paths: list[str]) -> list[FileEntry]:
    return sorted(FileEntry(p, i, None) for i, p in enumerate(paths))


@pytest.mark.parametrize("case", case_params())
def test_classifying_a_listing_equals_classifying_each_file(case: Case) -> None:
    listing = Checkpoint.open(str(case.checkpoint)).listing
    assert classify_listing(listing) == [classify(e) for e in listing]


def test_classifying_tricky_names_equals_classifying_each_file() -> None:
    entries = _entries(TRICKY)
    fast = classify_listing(entries)
    assert fast == [classify(e) for e in entries]
    kinds = {f.path: f.kind for f in fast}
    assert kinds[".ckpt-lock"] is FileKind.CKPT_LOCK
    assert kinds["state/0/0/.ckpt-lock"] is FileKind.UNKNOWN
    assert kinds["state/0/1/left-keyToNumValues/1.delta"] is FileKind.DELTA
    assert kinds["state/0/1/left-keyToNumValues/SSTs/1.delta"] is FileKind.UNKNOWN


@pytest.mark.parametrize("case", case_params())
def test_files_by_kind_keep_the_listing_order(case: Case) -> None:
    ckpt = Checkpoint.open(str(case.checkpoint))
    for kinds in [
        (FileKind.OFFSETS,),
        (FileKind.HADOOP_CRC, FileKind.SPARK_CHECKSUM, FileKind.DELTA),
        (FileKind.ZIP, FileKind.ZIP),
        tuple(FileKind),
    ]:
        assert ckpt.of_kind(*kinds) == [f for f in ckpt.files if f.kind in kinds]
    counts = {k.value: sum(f.kind is k for f in ckpt.files) for k in FileKind}
    assert ckpt.count_by_kind() == {k: n for k, n in sorted(counts.items()) if n}


@pytest.mark.parametrize("case", case_params())
def test_partition_figures_of_versions(case: Case) -> None:
    ckpt = Checkpoint.open(str(case.checkpoint))
    report = describe_versions(ckpt)
    for op in report.operators:
        for store in op.stores:
            model = ckpt.operators[op.id].stores[store.name]
            for part in store.partitions:
                p = model.partitions[part.id]
                assert part.snapshot_versions == p.snapshot_versions
                assert part.shared_files == len(p.shared_files)
                assert part.bytes == sum(f.entry.size for f in p.files)
                ids = {str(v): sv.unique_ids for v, sv in p.versions.items() if sv.unique_ids}
                assert part.unique_ids == ids
    assert report.files.bytes == sum(e.size for e in ckpt.listing)


def test_listing_lookups_search_then_index() -> None:
    paths = [f"state/0/{p}/{v}.delta" for p in range(3) for v in range(1, 40)]
    listing = Listing(_entries(paths))
    probes = ["", "a", "commits/1", "state/0/0/1.delt", "zzz", *paths[::7], paths[-1]]
    first = [listing.get(p) for p in probes]  # binary searches
    for _ in range(_SEARCHES_BEFORE_INDEX):
        listing.get(paths[0])
    assert listing._by_path is not None  # now a dict
    assert [listing.get(p) for p in probes] == first
    assert [e.path if e else None for e in first] == [p if p in paths else None for p in probes]


def test_local_listing_stats_each_file_and_records_links(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    (root / "state" / "0" / "0").mkdir(parents=True)
    (root / "offsets").mkdir()
    (root / "offsets" / "0").write_bytes(b"v1\n{}")
    (root / "state" / "0" / "0" / "1.delta").write_bytes(b"x" * 17)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_bytes(b"abc")
    os.symlink(outside / "f", root / "state" / "0" / "0" / "2.delta")  # a link to a file
    os.symlink(outside, root / "state" / "0" / "linked")  # a link to a directory
    os.symlink(tmp_path / "gone", root / "dangling")
    symlinks: dict[str, str] = {}
    stats = StorageStats()
    found = {e.path: e for e in list_local(str(root), str(root), stats, symlinks)}
    expected = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            full = Path(dirpath) / name
            if full.exists() and not full.is_dir():
                st = full.stat()
                expected[str(full.relative_to(root))] = (st.st_size, st.st_mtime)
    assert {p: (e.size, e.mtime) for p, e in found.items()} == expected
    assert found["state/0/0/2.delta"].size == 3  # listed through the link
    assert set(symlinks) == {"state/0/0/2.delta", "state/0/linked", "dangling"}
    assert stats.list == 5  # root, offsets, state, state/0, state/0/0: never the linked dir


def test_the_cli_imports_only_the_command_it_runs() -> None:
    code = (
        "import sys\n"
        "from ckpt_cli.cli import COMMANDS, _commands_in, make_app\n"
        "assert list(_commands_in(['--debug', 'versions', 'x'])) == ['versions']\n"
        "assert list(_commands_in(['--help'])) == list(COMMANDS)\n"
        "assert list(_commands_in(['nosuch'])) == list(COMMANDS)\n"
        "assert list(_commands_in(['--version'])) == []\n"
        "make_app(_commands_in(['versions', 'x']))\n"
        "print(sorted(m for m in sys.modules if m.startswith('ckpt_cli.cli.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "ckpt_cli.cli.versions" in out
    for other in ("replay", "repartition", "cleanup", "repair", "du", "inspect"):
        assert f"ckpt_cli.cli.{other}'" not in out


def test_the_full_app_has_every_command() -> None:
    import typer.main
    from typer.core import TyperGroup

    from ckpt_cli.cli import COMMANDS, app

    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    assert list(group.commands) == list(COMMANDS)


def test_a_command_run_alone_works(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.name == "spark34-hdfs-agg")
    out = tmp_path / "versions.json"
    with out.open("w") as fh:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ckpt_cli",
                "--debug",
                "versions",
                str(case.checkpoint),
                "--json",
            ],
            stdout=fh,
            stderr=subprocess.PIPE,
            text=True,
        )
    assert done.returncode == 0, done.stderr
    assert '"operators"' in out.read_text()


@pytest.mark.parametrize("case", case_params())
def test_versions_json_is_the_reports_fields(case: Case) -> None:
    report = describe_versions(Checkpoint.open(str(case.checkpoint)))
    reference = asdict(report)  # every field, nested ones included
    for op in reference["operators"]:
        for store in op["stores"]:
            for part in store["partitions"]:
                if not part["unique_ids"]:
                    del part["unique_ids"]  # only with checkpoint format v2
    assert report.body_json() == reference
