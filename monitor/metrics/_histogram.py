"""A plain histogram (cumulative buckets rendered at scrape time), updated without locks or label lookups."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence

from prometheus_client.core import HistogramMetricFamily


class Histogram:
    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(sorted(bounds))
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0

    def observe(self, value: float, n: int = 1) -> None:
        """Record `n` observations of `value`."""
        self.counts[bisect_left(self.bounds, value)] += n
        self.total += value * n

    def observe_each(self, values: Iterable[float]) -> None:
        """Record each value once, in order: the same as `observe(v)` for each (the sum adds them one by one)."""
        counts = self.counts
        bounds = self.bounds
        total = self.total
        for value in values:
            counts[bisect_left(bounds, value)] += 1
            total += value
        self.total = total

    def family(self, name: str, doc: str) -> HistogramMetricFamily:
        """The family; safe from another thread than the one observing (a scrape renders in its own thread):
        the buckets and the count come from one copy of the counts, so they always agree (cumulative, +Inf =
        count); the sum may be a few observations ahead or behind them."""
        counts = list(self.counts)  # one copy, taken at once (a C-level copy: no observation lands in the middle)
        buckets: list[tuple[str, float]] = []
        acc = 0
        for bound, c in zip(self.bounds, counts, strict=False):
            acc += c
            buckets.append((repr(float(bound)), acc))
        buckets.append(("+Inf", acc + counts[-1]))
        return HistogramMetricFamily(name, doc, buckets=buckets, sum_value=self.total)
