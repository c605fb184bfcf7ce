"""Label values for tools and agents: only names from the catalog and configuration, else `__other__`."""

from __future__ import annotations

from collections.abc import Iterable

from monitor.metrics.names import OTHER
from monitor.verdict import NONE_LABEL, UNKNOWN_LABEL


class LabelPolicy:
    """Maps free-form names to a bounded set of label values."""

    __slots__ = ("agents", "tools", "_fixed")

    def __init__(self, *, tools: Iterable[str] = (), agents: Iterable[str] = ()) -> None:
        self.tools = frozenset(tools)
        self.agents = frozenset(agents)
        self._fixed = frozenset({NONE_LABEL, UNKNOWN_LABEL})

    def tool(self, name: str) -> str:
        return name if name in self.tools else OTHER

    def agent(self, name: str) -> str:
        return name if name in self.agents else OTHER

    def matrix(self, name: str) -> str:
        """A confusion-matrix cell label: a tool, `(none)` or `(unknown)`."""
        if name in self.tools or name in self._fixed:
            return name
        return OTHER

    def rule(self, rule_id: str) -> str:
        # Labelled dataset cases ("case:<id>") are unbounded: fold them into one value.
        return "case" if rule_id.startswith("case:") else rule_id
