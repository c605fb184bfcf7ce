"""Sizes in bytes as options and variables take them: a number of bytes, or with a unit as Prometheus, the
Collector and Kubernetes write them (512MiB, 16MB, 1.5GiB): B; KB, MB, GB, TB (powers of 1000); KiB, MiB, GiB, TiB
(powers of 1024). Units are read without regard to case (there are no bits here)."""

from __future__ import annotations

import math
import re

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*", re.IGNORECASE)
MAX_SIZE = 1 << 50  # 1 PiB: past any memory or body this service bounds, and exact as a float


def parse_size(text: str, minimum: int = 1) -> int:
    """'512MiB' -> 536870912, '16MB' -> 16000000, '1024' -> 1024; ValueError, saying what to write, when it is not a
    size, is under `minimum` bytes, or is over MAX_SIZE. A fraction of a byte is rounded down."""
    m = _SIZE.fullmatch(text)
    unit = _UNITS.get(m.group(2).lower()) if m else None
    if m is None or unit is None:
        raise ValueError(f"invalid size {text!r}: use a number of bytes, or with a unit: B, KB, MB, GB, TB, KiB, MiB, "
                         "GiB or TiB (e.g. 512MiB)")
    value = float(m.group(1)) * unit
    if not math.isfinite(value) or value > MAX_SIZE:
        raise ValueError(f"size {text!r} is too large: at most {format_size(MAX_SIZE)}")
    n = int(value)
    if n < minimum:
        raise ValueError(f"size {text!r} is too small: at least {format_size(minimum)}")
    return n


_FORMS = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("TB", 1000**4), ("GB", 1000**3),
          ("MB", 1000**2), ("KB", 1000), ("B", 1))


def format_size(n: int) -> str:
    """The shortest exact form, a binary unit first among equals: 536870912 -> '512MiB', 16000000 -> '16MB' (not
    '15625KiB'), 1024 -> '1KiB', 1500 -> '1500B'."""
    forms = [f"{n // size}{suffix}" for suffix, size in _FORMS if n >= size and n % size == 0]
    return min(forms, key=len) if forms else f"{n}B"
