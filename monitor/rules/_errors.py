"""The errors a rule file can raise: each names the file, line, column and key."""

from __future__ import annotations

from collections.abc import Sequence

from monitor._text import visible

MAX_REPORTED = 50
"""Most errors `RuleFileErrors` spells out; past them one line says how many more there are."""


def place(file: str, line: int, column: int) -> str:
    """`file:line:column`, `file:line` without a column, `file` alone without a line (a file that cannot be read, or
    too large: no place in it; line 0 column 0 would say nothing to a user)."""
    if line <= 0:
        return file
    return f"{file}:{line}:{column}" if column > 0 else f"{file}:{line}"


class RuleFileError(ValueError):
    """A rule file (or a cases file it names) is invalid.

    `line` and `column` are 1-based (0 when unknown); `key` is the offending key path, like
    `expect[2].call[0].tool`, or "" for the whole file.
    """

    def __init__(self, file: str, line: int, column: int, key: str, message: str) -> None:
        self.file = file
        self.line = line
        self.column = column
        self.key = key
        self.message = message
        super().__init__(str(self))

    @property
    def errors(self) -> tuple[RuleFileError, ...]:
        """Every problem found (this one alone; several for `RuleFileErrors`)."""
        return (self,)

    def lines(self) -> list[str]:
        """One line per problem, at most MAX_REPORTED, then `... and N more`."""
        return [self._where()]

    def _where(self) -> str:
        """The problem's line, as shown: a control character (of a file name, or quoted from the file) escaped."""
        where = place(self.file, self.line, self.column)
        return visible(f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}")

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def __reduce__(self) -> tuple[type[RuleFileError], tuple[str, int, int, str, str]]:
        return (RuleFileError, (self.file, self.line, self.column, self.key, self.message))


class RuleFileErrors(RuleFileError):
    """Several independent problems, found in one pass so that a user fixes them all in one go. The location
    attributes are those of the first; `errors` holds them all, in the order found (file order within a file)."""

    def __init__(self, errors: Sequence[RuleFileError]) -> None:
        self._errors = tuple(e for err in errors for e in err.errors)
        first = self._errors[0]
        super().__init__(first.file, first.line, first.column, first.key, first.message)

    @property
    def errors(self) -> tuple[RuleFileError, ...]:
        return self._errors

    def lines(self) -> list[str]:
        shown = [e._where() for e in self._errors[:MAX_REPORTED]]
        more = len(self._errors) - len(shown)
        return [*shown, f"... and {more} more"] if more else shown

    def __reduce__(self) -> tuple[type[RuleFileErrors], tuple[tuple[RuleFileError, ...]]]:  # type: ignore[override]
        return (RuleFileErrors, (self._errors,))


def raise_all(errors: Sequence[RuleFileError]) -> None:
    """Raise the one error of `errors`, or all of them as a RuleFileErrors; nothing when there is none."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise RuleFileErrors(errors)
