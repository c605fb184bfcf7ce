"""Turns of an agent the configuration does not name, exported over real OTLP/HTTP into a real `serve`: they count as
agent="__other__", and rule files scoped to another agent do not judge them. Before, nothing said so: an agent named
as README's example (`weather-bot`) under rules/travel.yaml (`agent: travel`) showed only as
`toolwatch_turns_total{agent="__other__",judged="false"}`."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from monitor.serve import Server
from tests.monitor.service.conftest import ServeFactory, scrape, value, wait_for

TRAVEL = Path(__file__).resolve().parents[3] / "rules" / "travel.yaml"


def _send(server: Server, agents: list[str]) -> None:
    """One weather turn per agent name, with its get_weather call, through the OTLP/HTTP exporter."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=server.endpoint, timeout=10)))
    tracer = provider.get_tracer("tests")
    before = server.pipeline.turns_judged
    for n, agent in enumerate(agents):
        attrs = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text",
                                                                              "content": "Weather in Oslo?"}]}]),
        }
        with tracer.start_as_current_span(f"invoke_agent {agent}", attributes=attrs):
            call = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                    "gen_ai.tool.call.id": f"call_{n}", "gen_ai.tool.call.arguments": json.dumps({"city": "Oslo"})}
            with tracer.start_as_current_span("execute_tool get_weather", attributes=call):
                pass
    provider.shutdown()
    wait_for(lambda: server.pipeline.turns_judged >= before + len(agents))


def _unscoped(tmp_path: Path) -> Path:
    """rules/travel.yaml without its `agent:` (and alerts): its rules apply to every agent."""
    text = TRAVEL.read_text(encoding="utf-8").replace("\nagent: travel\n", "\n").split("\nalerts:")[0]
    assert "agent:" not in text
    path = tmp_path / "travel-any.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("monitor.")]


def test_an_agent_no_file_names_under_scoped_rules_is_said_unjudged_and_other(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    _, server = serve(rules=(str(TRAVEL),))
    with caplog.at_level(logging.INFO):
        _send(server, ["weather-bot"] * 5)
    s = scrape(server)
    assert value(s, "toolwatch_turns_total", agent="__other__", judged="false") == 5  # what the user sees
    warnings = [w for w in _warnings(caplog) if "weather-bot" in w]
    assert len(warnings) == 1, _warnings(caplog)  # once per name, however many turns
    w = warnings[0]
    assert '"__other__"' in w and "--agent weather-bot" in w, w  # the label
    assert "unjudged" in w and "agent: travel" in w, w  # the scope


def test_an_agent_given_to_agent_but_under_scoped_rules_is_said_unjudged(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    _, server = serve(rules=(str(TRAVEL),), agents=("weather-bot",))
    with caplog.at_level(logging.INFO):
        _send(server, ["weather-bot"] * 2)
    assert value(scrape(server), "toolwatch_turns_total", agent="weather-bot", judged="false") == 2
    warnings = [w for w in _warnings(caplog) if "weather-bot" in w]
    assert len(warnings) == 1 and "unjudged" in warnings[0] and "__other__" not in warnings[0], _warnings(caplog)


def test_an_agent_under_unscoped_rules_is_said_other_only(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    _, server = serve(rules=(str(_unscoped(tmp_path)),))
    with caplog.at_level(logging.INFO):
        _send(server, ["weather-bot"])
    assert value(scrape(server), "toolwatch_turns_total", agent="__other__", judged="true") == 1
    warnings = [w for w in _warnings(caplog) if "weather-bot" in w]
    assert len(warnings) == 1 and "--agent weather-bot" in warnings[0] and "unjudged" not in warnings[0], warnings


@pytest.mark.parametrize(
    ("scoped", "agents", "sent"),
    [(True, (), "travel"), (False, ("weather-bot",), "weather-bot"), (True, (), "")],
    ids=["the file's agent", "--agent under unscoped rules", "no agent name"],
)
def test_a_named_agent_or_no_name_is_not_warned_of(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture, tmp_path: Path, scoped: bool, agents: tuple[str, ...],
    sent: str,
) -> None:
    rules = TRAVEL if scoped else _unscoped(tmp_path)
    _, server = serve(rules=(str(rules),), agents=agents)
    with caplog.at_level(logging.INFO):
        _send(server, [sent] * 3)
    assert not _warnings(caplog), _warnings(caplog)


def test_the_names_warned_of_are_bounded(serve: ServeFactory, caplog: pytest.LogCaptureFixture) -> None:
    # Agent names are the clients' to choose: a warning each, but not without end.
    _, server = serve(rules=(str(TRAVEL),))
    with caplog.at_level(logging.INFO):
        _send(server, [f"bot-{i}" for i in range(60)])
        _send(server, [f"bot-{i}" for i in range(60, 70)])
    warnings = _warnings(caplog)
    assert 10 <= len(warnings) <= 40, len(warnings)
    assert "not logged" in warnings[-1], warnings[-1]
