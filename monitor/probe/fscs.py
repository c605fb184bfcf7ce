"""Fixed-Size-Candidate-Set adaptive random testing (FSCS-ART) with Levenshtein distance.

Each step draws K candidates; the one whose minimum distance to the inputs already tested is largest
runs next (Chen, Leung and Mak, 2004). Distances are rapidfuzz's `Levenshtein.distance`.

The exact rule is kept while skipping most of the work: a candidate's distance to a small sample of the
tested inputs is an upper bound of its minimum, so candidates are tried in decreasing bound order and
dropped when the bound is no better than the best minimum found; a candidate that might win is dropped
as soon as `process.extract_iter` yields one tested input within the best minimum (early exit); only a
candidate that wins is scanned in full (`process.extractOne`, bounded by its sample bound).

Inputs are compared on their first MAX_COMPARED_CHARS characters: Levenshtein's cost grows with the product of
the lengths (two 200,000-character inputs take about a second), and a generator's input has no length limit.
The selection is the exact max-min over those prefixes; only they are kept of the tested inputs.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

SAMPLE = 48
MAX_COMPARED_CHARS = 1000  # characters of each input the distances are computed on


@dataclass(slots=True, frozen=True)
class Choice:
    index: int  # index of the chosen candidate
    distance: int | None  # its minimum distance to the tested inputs (None when nothing was tested yet)


class FscsSelector:
    """Keeps the tested inputs and picks the next candidate. Not thread-safe (one probe loop owns it)."""

    def __init__(self, *, seed: int = 0, sample: int = SAMPLE) -> None:
        self.tested: list[str] = []
        self._rng = random.Random(seed)
        self._sample = sample

    def __len__(self) -> int:
        return len(self.tested)

    def add(self, text: str) -> None:
        self.tested.append(text[:MAX_COMPARED_CHARS])

    def min_distance(self, text: str, *, cutoff: int | None = None) -> int | None:
        """Minimum Levenshtein distance from `text` to the tested inputs, on their first MAX_COMPARED_CHARS
        characters (None: nothing tested, or > cutoff)."""
        if not self.tested:
            return None
        found = process.extractOne(text[:MAX_COMPARED_CHARS], self.tested, scorer=Levenshtein.distance,
                                   score_cutoff=cutoff)
        return None if found is None else int(found[1])

    def _any_within(self, text: str, limit: int) -> bool:
        hits = process.extract_iter(text, self.tested, scorer=Levenshtein.distance, score_cutoff=limit)
        return next(hits, None) is not None

    def select(self, candidates: Sequence[str]) -> Choice:
        """The candidate farthest from everything tested (ties: the earliest candidate)."""
        if not candidates:
            raise ValueError("no candidates to choose from")
        if not self.tested:
            return Choice(0, None)
        candidates = [c[:MAX_COMPARED_CHARS] for c in candidates]
        tested = self.tested
        sample = tested if len(tested) <= self._sample else self._rng.sample(tested, self._sample)
        bounds = []
        for i, cand in enumerate(candidates):
            near = process.extractOne(cand, sample, scorer=Levenshtein.distance)
            bounds.append((int(near[1]) if near is not None else 0, i))
        bounds.sort(key=lambda b: (-b[0], b[1]))
        best, best_index = -1, bounds[0][1]
        for bound, i in bounds:
            if bound < best or (bound == best and i > best_index):
                continue
            cand = candidates[i]
            # A tested input within `limit` means no win (a later candidate must beat `best`, an earlier
            # one may tie it).
            limit = best if i > best_index else best - 1
            if limit >= 0 and self._any_within(cand, limit):
                continue
            found = process.extractOne(cand, tested, scorer=Levenshtein.distance, score_cutoff=bound)
            exact = bound if found is None else int(found[1])
            if exact > best or (exact == best and i < best_index):
                best, best_index = exact, i
        return Choice(best_index, best)
