"""A fault of the normalizer on one span (a bug of ours, which no real producer can be made to trigger on purpose:
simulated by making one producer's reader raise) costs that span only.

Before, the exception left `toolwatch serve`'s request handler: the exporter got `500 Server got itself in trouble`,
which OTLP exporters do not retry, and every span of its batch was lost, counted nowhere. Now the batch is read again
span by span: the span that fails is rejected as `normalize_error` (partial success, `toolwatch_spans_rejected_total`),
logged with its traceback, and the others are used.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

import monitor.normalize._foreign as foreign
from monitor.normalize import REASON_NORMALIZE_ERROR, Normalizer
from monitor.records import ToolCall, Turn
from tests.monitor.service.captures import DATA, capture
from tests.monitor.service.conftest import ServeFactory, scrape, value, wait_for
from tests.monitor.service.http_util import post
from tests.monitor.service.test_requested_calls import IMPLS, _impl

CAPTURE = "mlflow_tool"  # MLflow's own attributes: its spans are read by _foreign._mlflow, on the C path too


def _faulty_tool_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow's reader raises on its TOOL spans, as a bug would; other spans are read as they are."""
    real = foreign._mlflow

    def faulty(span: Any, kind: Any, *args: Any) -> None:
        if kind == '"TOOL"' or kind == "TOOL":
            raise KeyError("a bug")
        real(span, kind, *args)

    monkeypatch.setattr(foreign, "_mlflow", faulty)


@pytest.mark.parametrize("impl", IMPLS)
def test_a_span_the_normalizer_fails_on_is_rejected_and_the_rest_of_its_batch_used(
    impl: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _impl(impl)
    spans = capture(CAPTURE)
    whole, whole_rejected = Normalizer().split(spans)
    assert whole_rejected == {}
    _faulty_tool_reader(monkeypatch)
    normalizer = Normalizer()
    with caplog.at_level(logging.ERROR, logger="monitor.normalize"):
        records, rejected = normalizer.split(spans)
    assert rejected == {REASON_NORMALIZE_ERROR: 1} == normalizer.rejected
    tools = [r for r in whole if type(r) is ToolCall]
    assert len(tools) == 1  # the one tool span, which the faulty reader loses
    assert [r for r in records if type(r) is ToolCall] == []
    turns = [r.input_text for r in records if isinstance(r, Turn)]
    assert turns == [r.input_text for r in whole if isinstance(r, Turn)]
    assert len(records) == len(whole) - 1
    [log] = [r for r in caplog.records if "normalize" in r.getMessage()]
    assert "Traceback (most recent call last)" in log.getMessage() and "KeyError: 'a bug'" in log.getMessage()


def test_the_fault_log_is_bounded_when_the_exception_quotes_the_span(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A KeyError of a key of megabytes (an attribute of the span) is logged cut, not whole."""

    def faulty(span: Any, kind: Any, *args: Any) -> None:
        raise KeyError("k" * 5_000_000)

    monkeypatch.setattr(foreign, "_mlflow", faulty)
    with caplog.at_level(logging.ERROR, logger="monitor.normalize"):
        Normalizer().split(capture(CAPTURE))
    [log] = [r for r in caplog.records if "normalize" in r.getMessage()]
    assert "KeyError" in log.getMessage() and len(log.getMessage()) < 40_000


def test_spans_given_as_an_iterator_are_read_again_after_a_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    spans = capture(CAPTURE)
    _faulty_tool_reader(monkeypatch)
    records, rejected = Normalizer().split(iter(spans))
    assert rejected == {REASON_NORMALIZE_ERROR: 1}
    assert any(isinstance(r, Turn) for r in records)


def test_serve_answers_a_batch_with_a_faulty_span_with_partial_success(
    serve: ServeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over real HTTP: 200 with the span rejected and named, the rest judged (the turn, its calls less the lost one),
    the rejection on /metrics; not a 500 that loses the batch."""
    _faulty_tool_reader(monkeypatch)
    _, server = serve(grace_s=0.05, turnless_timeout_s=0.2)
    status = []
    for line in (DATA / f"{CAPTURE}.jsonl").read_bytes().splitlines():
        code, body, _ = post(server.endpoint, line, "application/json")
        status.append(code)
        if b"partialSuccess" in body:
            partial = json.loads(body)["partialSuccess"]
    assert status == [200] * len(status)
    assert partial == {"rejectedSpans": "1", "errorMessage": f"1 spans rejected: {REASON_NORMALIZE_ERROR}=1"}
    wait_for(lambda: sum(v for (name, _), v in scrape(server).items() if name == "toolwatch_turns_total") == 1)
    samples = scrape(server)
    assert value(samples, "toolwatch_spans_rejected_total", reason=REASON_NORMALIZE_ERROR) == 1
