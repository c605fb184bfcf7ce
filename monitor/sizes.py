"""Sizes in bytes as options and variables take them: a number of bytes, or with a unit: B; KB, MB, GB, TB (powers of
1000); KiB, MiB, GiB, TiB (powers of 1024); and Kubernetes' quantity suffixes K, M, G, T (powers of 1000) and Ki, Mi,
Gi, Ti (powers of 1024). Units are read without regard to case (there are no bits here), but for a lowercase m
alone: a thousandth in Kubernetes, refused.
Prometheus reads its own KB, MB... (--storage.tsdb.retention.size) as powers of 1024: write KiB, MiB... to mean that
here. Digits are ASCII; a fraction is exact (1.005KB is 1005 bytes), and a fraction of a byte is rounded down."""

from __future__ import annotations

import re
from fractions import Fraction

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "k": 1000,
    "m": 1000**2,
    "g": 1000**3,
    "t": 1000**4,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
    "ki": 1 << 10,
    "mi": 1 << 20,
    "gi": 1 << 30,
    "ti": 1 << 40,
}
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-z]*)\s*", re.IGNORECASE | re.ASCII)
MAX_SIZE = 1 << 50  # 1 PiB: past any memory or body this service bounds
_MAX_DIGITS = 64  # digits before or after the point that are read: more is too large or too precise to mean a size


def parse_size(text: str, minimum: int = 1) -> int:
    """'512MiB' -> 536870912, '16MB' -> 16000000, '1024' -> 1024; ValueError, saying what to write, when it is not a
    size, is under `minimum` bytes, or is over MAX_SIZE. A fraction of a byte is rounded down."""
    m = _SIZE.fullmatch(text)
    unit = _UNITS.get(m.group(2).lower()) if m else None
    if m is None or unit is None:
        raise ValueError(f"invalid size {text!r}: use a number of bytes, or with a unit: B, KB, MB, GB, TB, KiB, MiB, "
                         "GiB or TiB (e.g. 512MiB), or Kubernetes' K, M, G, T, Ki, Mi, Gi or Ti")
    if m.group(2) == "m":
        raise ValueError(f"invalid size {text!r}: a lowercase m is a thousandth in Kubernetes quantities; write M or "
                         "MB for 10^6 bytes, Mi or MiB for 2^20")
    whole, _, part = m.group(1).partition(".")
    whole, part = whole.lstrip("0") or "0", part.rstrip("0")
    if len(whole) > _MAX_DIGITS or int(whole) * unit > MAX_SIZE:
        raise ValueError(f"size {text!r} is too large: at most {format_size(MAX_SIZE)}")
    if len(part) > _MAX_DIGITS:
        raise ValueError(f"size {text!r} has too many digits after the point: at most {_MAX_DIGITS}")
    n = int(Fraction(f"{whole}.{part}") * unit)
    if n > MAX_SIZE:
        raise ValueError(f"size {text!r} is too large: at most {format_size(MAX_SIZE)}")
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
