"""A warning for the turns of an agent the configuration does not name.

Such turns count under `agent="__other__"` (label values are only the agents the rule files and --agent name), and rule
files scoped to other agents (`agent:`) do not judge them: an agent named otherwise than its rule file's `agent:`
showed only as `toolwatch_turns_total{agent="__other__",judged="false"}`, and nothing said why. One warning line per
agent name, for a bounded number of names (they are the clients' to choose)."""

from __future__ import annotations

import logging
import shlex
from collections.abc import Iterable

from monitor._text import elide
from monitor.metrics.names import OTHER

logger = logging.getLogger(__name__)

MAX_NAMES = 32  # agent names warned of (per rules in force); the others are not logged
_NAME_MAX = 100  # characters of a name quoted in the log


class UnnamedAgents:
    """Warns once per agent name whose turns count as `__other__` or that no `expect` rule can judge."""

    __slots__ = ("_known", "_labels", "_scoped", "_unscoped_rules", "_warned", "_full")

    def __init__(self) -> None:
        self._known: frozenset[str] = frozenset()
        self._labels: frozenset[str] = frozenset()
        self._scoped: frozenset[str] = frozenset()
        self._unscoped_rules = True
        self._warned: set[str] = set()
        self._full = False

    def configure(self, *, labels: Iterable[str], scoped: Iterable[str], unscoped_rules: bool) -> None:
        """The rules in force: the agent label values, the agents rule files are scoped to, and whether any `expect`
        rule is unscoped (applies to every agent). Names are warned of again under new rules."""
        self._labels = frozenset(labels)
        self._scoped = frozenset(scoped)
        self._unscoped_rules = unscoped_rules
        # Names nothing is to be said of: labelled, and judged by their own or by unscoped rules.
        self._known = self._labels if unscoped_rules else self._labels & self._scoped
        self._warned = set()
        self._full = False

    def check(self, names: Iterable[str]) -> None:
        """Warn of the names (the agents of judged turns) not warned of yet; `""`, a turn without a name, is not."""
        known, warned = self._known, self._warned
        for name in names:
            if not name or name in known or name in warned:
                continue
            if len(warned) >= MAX_NAMES:
                if not self._full:
                    self._full = True
                    logger.warning("turns of more agents that the rules do not name: not logged (%d were)", MAX_NAMES)
                return
            warned.add(name)
            logger.warning("%s", self.message(name))

    def message(self, name: str) -> str:
        cut = elide(name, _NAME_MAX)
        parts: list[str] = []
        if name not in self._labels:
            option = f"--agent {shlex.quote(cut)}" if cut.isprintable() else "--agent NAME"
            parts.append(
                f'turns of agent {cut!r} count as agent="{OTHER}", as no rule file\'s `agent:` and no --agent name it: '
                f"pass {option} (TOOLWATCH_AGENTS) to count them under their own name"
            )
        if not self._unscoped_rules and name not in self._scoped:
            scoped = ", ".join(f"agent: {a}" for a in sorted(self._scoped))
            parts.append(
                ("" if parts else f"turns of agent {cut!r}: ")
                + f"no expect rule applies to them, as every rule file is scoped to another agent ({scoped}): they"
                " are unjudged; set `agent:` in their rule file to this name, or leave it out to apply the file to"
                " every agent"
            )
        return "; ".join(parts)
