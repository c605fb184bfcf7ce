"""load_extension: a C extension built from other sources is refused, the Python code used as when it is not built.

An extension is built in place (`setup.py build_ext --inplace`) and stays when the sources change: after a checkout
whose `init` takes one argument more (the assembler's and its budget's took CallIdMark), the extension built before
refuses its arguments with a TypeError (every `init` checks their number). That must not fail the import of
monitor (serve, replay, every command): the extension is not used, as load_extension says. Here the real extensions
are given the arguments of their previous `init` (one fewer): the refusal a build of the other sources gives.
"""

from __future__ import annotations

import logging
import os

import pytest

from monitor.assembly import _assembler, _budget
from monitor.otlp import Span
from monitor.otlp._accel import PURE_PYTHON_ENV, load_extension
from monitor.records import HandoffMark, InputMark, OfferedTools, RequestedCall, RunRoot, ToolCall, Turn

pytestmark = pytest.mark.skipif(os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"), reason="pure Python forced")


def test_the_budget_built_from_other_sources_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    assert _assembler._RECORDS_BYTES is not _budget.records_bytes_py  # loaded, with the arguments of these sources
    previous = (ToolCall, RequestedCall, HandoffMark, OfferedTools, Turn, Span, _assembler._Trace,
                _budget.record_bytes, _budget.released_bytes_py, _budget.RECORD_BYTES, _budget.DEFINITION_BYTES,
                _budget.MAX_DEPTH, InputMark, RunRoot)  # fmt: skip
    with caplog.at_level(logging.WARNING):
        assert load_extension("monitor.assembly._cbudget", *previous) is None
    assert "monitor.assembly._cbudget" in caplog.text
    call = ToolCall("f", call_id="c", arguments="{}", trace_id="t" * 32, span_id="s" * 16)
    assert _assembler._RECORDS_BYTES([call]) == _budget.record_bytes(call)  # the loaded one is left as it was


def test_the_assembler_built_from_other_sources_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    assert _assembler._ADD_C is not None
    with caplog.at_level(logging.WARNING):
        assert load_extension("monitor.assembly._cassembler", *range(20)) is None
    assert "monitor.assembly._cassembler" in caplog.text
