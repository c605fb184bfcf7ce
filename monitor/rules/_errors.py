"""The one error a rule file can raise: it names the file, line, column and key."""

from __future__ import annotations


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

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"

    def __reduce__(self) -> tuple[type[RuleFileError], tuple[str, int, int, str, str]]:
        return (RuleFileError, (self.file, self.line, self.column, self.key, self.message))
