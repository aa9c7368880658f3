"""What repair and repartition refuse about symbolic links is worded beside their other
safety checks (``cleanup/safety``); the storage layer only records the links."""

from __future__ import annotations

import shutil
from pathlib import Path

from ckpt_cli.change.safety import links_refused
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.storage.listing import Listing
from tests.conftest import CASES_DIR


def test_links_are_data_in_storage_and_refusals_in_safety(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    shutil.copytree(CASES_DIR / "spark4-hdfs-agg" / "checkpoint", root)
    assert links_refused(Checkpoint.open(str(root))) == []
    elsewhere = tmp_path / "elsewhere"
    (root / "commits" / "7").rename(elsewhere)
    (root / "commits" / "7").symlink_to(elsewhere)
    ckpt = Checkpoint.open(str(root))
    assert ckpt.listing.symlinks == {"commits/7": str(elsewhere)}
    assert links_refused(ckpt) == [
        f"commits/7 is a symbolic link (to {elsewhere}); ckpt does not follow or change "
        "links: replace it with what it points to"
    ]
    assert not hasattr(Listing, "links_refused")  # no command wording in storage
