"""The files of a capture directory, in the order they were written, rotation backups before their live file.

The Collector file exporter's `rotation:` (timberjack; lumberjack in older Collectors) renames a full file to its
name with the time, and since timberjack the reason, before the extension (at the end of a name without one), and
goes on writing to `path` itself: `traces-2025-04-30T15-00-00.000-size.json` holds what came before `traces.json`,
and `foo-2025-04-30T15-00-00.000-size` what came before `foo`. The times are fixed width, so backups sort by name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

_BACKUP = re.compile(
    r"(?P<stem>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}\.\d{3}(?:-[a-z0-9_-]{1,32})?(?P<ext>(?:\.[^.]+)*)"
)


def _live_name(name: str, compressed: tuple[str, ...]) -> str | None:
    """The name of the file a backup named `name` was rotated from (a compression suffix added since left off), or
    None when `name` is not a backup's."""
    m = _BACKUP.fullmatch(name)
    if m is None:
        return None
    ext = m["ext"]
    for suffix in compressed:
        if ext.lower().endswith(suffix):
            ext = ext[: -len(suffix)]
    return m["stem"] + ext


def capture_order(files: Iterable[Path], compressed: tuple[str, ...]) -> list[Path]:
    """`files` in sorted order (by path), except that each backup comes just before its live file, oldest first."""

    def key(p: Path) -> tuple[tuple[str, ...], int, str]:  # a backup sorts as its live file, just before it
        live = _live_name(p.name, compressed)
        return (p.parts, 1, "") if live is None else ((*p.parent.parts, live), 0, p.name)

    return sorted(files, key=key)


def rotated_without_suffix(files: Iterable[Path]) -> set[Path]:
    """The backups with no extension among `files`, and the live files they were rotated from (`path: ./foo`): span
    files that no suffix tells."""
    out: set[Path] = set()
    for p in files:
        m = _BACKUP.fullmatch(p.name)
        if m is not None and not m["ext"]:
            out.add(p)
            out.add(p.with_name(m["stem"]))
    return out
