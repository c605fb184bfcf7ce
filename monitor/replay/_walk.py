"""The regular files under a capture directory: symlinked directories followed, each real directory and each file
listed once."""

from __future__ import annotations

import os
from pathlib import Path


def regular_files(root: Path) -> list[Path]:
    """Regular files (or symlinks to them) under `root`, recursively, in name order depth first. A symlinked
    directory is followed (a capture may link in a day's directory), and each real directory is listed once, so a
    symlink loop ends. A file reached twice (a link to it, a hard link) is listed once, where the file itself is
    (not a symlink to it) if it is: read twice, its spans would be judged again past what turn assembly remembers, and
    at a link's place the order would be another. A directory that cannot be listed raises its OSError (naming it): its
    files are not silently left out."""
    out: list[Path] = []
    linked: set[Path] = set()  # the files in `out` found through a symlink to them
    files: dict[tuple[int, int], int] = {}  # (device, inode) -> the index in `out` of the file
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
                    st = entry.stat()
                    path, key = Path(entry.path), (st.st_dev, st.st_ino)
                    at = files.get(key) if st.st_ino else None  # no inode number (DirEntry.stat on Windows)
                    if at is None:
                        files[key] = len(out)
                        out.append(path)
                    elif out[at] in linked and not entry.is_symlink():
                        out[at] = path  # the file itself, not a link to it
                    else:
                        continue
                    if entry.is_symlink():
                        linked.add(path)
            except OSError:  # a symlink loop or a dangling link: no data behind it
                continue
        stack += reversed(subdirs)
    return out
