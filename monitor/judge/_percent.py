"""A ratio shown as a percentage, as every figure toolwatch prints is shown."""

from __future__ import annotations


def percent(value: float, decimals: int = 1, width: int = 0) -> str:
    """`0.925` -> `92.5%`, rounded to `decimals`, except that a ratio strictly between 0 and 1 never shows as 0 or 100
    (19999/20000 is 99.9%, not 100.0%: a figure that reads perfect must be). Such a ratio shows as the nearest value
    inside, one unit of the last decimal from the end."""
    text = f"{value * 100:{width}.{decimals}f}%"
    if 0 < value < 1:
        unit = 10.0**-decimals
        shown = round(value * 100, decimals)
        if shown >= 100:
            text = f"{100 - unit:{width}.{decimals}f}%"
        elif shown <= 0:
            text = f"{unit:{width}.{decimals}f}%"
    return text


def format_ratio(value: float | None) -> str:
    """A ratio as a percentage with one decimal (`percent`), or 'absent' for a zero denominator."""
    return "absent" if value is None else percent(value)
