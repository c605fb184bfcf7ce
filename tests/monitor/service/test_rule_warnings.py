"""A real `serve` started on rules that are valid but suspicious logs what `toolwatch rules check` warns of: a rule
that can never match, an argument check the tool's schema makes fail every call. Before, serve took them silently,
and a rule shadowed in production never fired."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.monitor.service.conftest import ServeFactory

HEAD = """version: 1
catalog:
  tools:
    - name: search
      schema: {type: object, properties: {q: {type: string}}, additionalProperties: false}
expect:
  - id: any
    call: [{tool: search}]
"""


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("monitor.")]


def test_suspicious_rules_are_warned_of_at_start(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    rules = tmp_path / "shadow.yaml"
    rules.write_text(HEAD + "  - id: never\n    when: {prefix: find}\n    call: [{tool: search, args: {query: "
                     "{exact: x}}}]\n", encoding="utf-8")
    with caplog.at_level(logging.INFO):
        serve(rules=(str(rules),))
    warnings = _warnings(caplog)
    assert any("rule 'never' can never match: rule 'any'" in w and "shadow.yaml:9" in w for w in warnings), warnings
    assert any("argument check on 'query'" in w for w in warnings), warnings


def test_clean_rules_warn_of_nothing(serve: ServeFactory, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        serve()  # the shipped incident-triage rules
    assert not _warnings(caplog), _warnings(caplog)


def test_the_warnings_are_bounded(serve: ServeFactory, caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    rules = tmp_path / "many.yaml"
    rules.write_text(HEAD + "".join(f"  - id: r{i}\n    call: [{{tool: search}}]\n" for i in range(100)),
                     encoding="utf-8")
    with caplog.at_level(logging.INFO):
        serve(rules=(str(rules),))
    warnings = _warnings(caplog)
    assert 5 <= len(warnings) <= 25, len(warnings)
    assert "toolwatch rules check" in warnings[-1] and "more" in warnings[-1], warnings[-1]
