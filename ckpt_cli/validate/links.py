"""Symbolic links in a local checkpoint (SYMLINK): the listing does not enter them."""

from __future__ import annotations

import os

from ckpt_cli.validate.codes import ERROR, MISSING_CODES, SYMLINK, WARNING
from ckpt_cli.validate.context import ValidationRun
from ckpt_cli.validate.report import Finding


def check_symlinks(run: ValidationRun) -> None:
    """One SYMLINK finding per symbolic link in the checkpoint (local disk). The listing
    does not enter linked directories, so files Spark reads through one look missing:
    those findings are taken back and counted on the link. Hadoop's local file system
    reads through links, so the files behind a link that resolves are only unchecked;
    behind a dangling link Spark cannot read them: an error."""
    links = run.ckpt.listing.symlinks
    if not links:
        return
    behind: dict[str, set[str]] = {link: set(run.behind_links.get(link, ())) for link in links}
    kept: list[Finding] = []
    for finding in run.findings:
        link = (
            run.link_of(finding.paths[0])
            if finding.code in MISSING_CODES and finding.paths
            else None
        )
        if link is None:
            kept.append(finding)
        else:
            behind[link].add(finding.paths[0])
    run.findings = kept
    for link, target in links.items():
        full = run.ckpt.storage.full_path(link)
        needed = sorted(behind[link])
        many = len(needed) > 1
        count = (
            f"{len(needed)} file{'s' if many else ''} the checkpoint needs "
            f"({needed[0]}{', ...' if many else ''}) {'are' if many else 'is'} behind it"
            if needed
            else ""
        )
        severity = WARNING
        if not os.path.exists(full):
            message = f"{link}: symbolic link to {target}, which does not exist; " + (
                f"{count}, and Spark cannot read {'them' if many else 'it'}"
                if needed
                else "Spark and ckpt see no file there"
            )
            severity = ERROR if needed else WARNING
        elif os.path.isdir(full):
            message = (
                f"{link}: symbolic link to the directory {target}; ckpt does not follow "
                "links, so the files under it are not checked"
                + (f" ({count}, unchecked)" if needed else "")
                + "; cleanup and repair never change anything through it"
            )
        else:
            message = (
                f"{link}: symbolic link to the file {target}; Spark and ckpt read it through "
                "the link; cleanup and repair never change it or anything through it"
            )
        run.add(
            SYMLINK,
            message,
            [link],
            severity=severity,
            target=target,
            files_behind=len(needed),
        )
