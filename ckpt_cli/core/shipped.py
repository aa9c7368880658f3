"""A checkpoint as an engine's task receives it: its storage and its listing, plain data
that pickles, opened in the task without listing the checkpoint again (the driver's one
listing is the one every task reads by)."""

from __future__ import annotations

from dataclasses import dataclass

from ckpt_cli.core.model import Checkpoint
from ckpt_cli.storage import Storage
from ckpt_cli.storage.listing import FileEntry, Listing


@dataclass(frozen=True)
class ShippedCheckpoint:
    storage: Storage
    entries: tuple[FileEntry, ...]

    @classmethod
    def of(cls, ckpt: Checkpoint) -> ShippedCheckpoint:
        return cls(ckpt.storage, tuple(ckpt.listing))

    def open(self) -> Checkpoint:
        return Checkpoint(self.storage, Listing(list(self.entries)))
