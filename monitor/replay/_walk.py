"""The regular files under a capture directory: symlinked directories followed, each real directory listed once."""

from __future__ import annotations

import os
from pathlib import Path


def regular_files(root: Path) -> list[Path]:
    """Regular files (or symlinks to them) under `root`, recursively, in name order depth first. A symlinked
    directory is followed (a capture may link in a day's directory), and each real directory is listed once, so a
    symlink loop ends. A directory that cannot be listed raises its OSError (naming it): its files are not silently
    left out."""
    out: list[Path] = []
    seen: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        d = stack.pop()
        info = d.stat()
        if (info.st_dev, info.st_ino) in seen:
            continue
        seen.add((info.st_dev, info.st_ino))
        with os.scandir(d) as it:
            entries = sorted(it, key=lambda e: e.name)
        subdirs = []
        for entry in entries:
            try:
                if entry.is_dir():
                    subdirs.append(Path(entry.path))
                elif entry.is_file():
                    out.append(Path(entry.path))
            except OSError:  # a symlink loop or a dangling link: no data behind it
                continue
        stack += reversed(subdirs)
    return out
