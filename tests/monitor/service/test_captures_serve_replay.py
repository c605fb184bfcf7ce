"""Every real producer's capture (data/*.jsonl) posted to one `toolwatch serve` process over real HTTP, as OTLP JSON
and as protobuf converted from it, on the C and on the pure-Python path: /metrics publishes exactly what
`toolwatch replay` of the same files reports.

The aggregate counts and the confusion matrix are compared with `replay --json`'s report. The report has no
per-agent or per-tool breakdown and no schema violation kinds, so the counters per agent and tool are compared with
the verdicts of the replay engine (`Replayer`, what `replay` runs) as the oracle's `published.counters` turns
verdicts into counters, label folding included.

The two agree by construction only where their clocks do (README "replay"): serve times --grace and
--turnless-timeout from each span's arrival, replay from the spans' end times. Here the lines are posted one after
another in the order replay reads the files, each capture's requests well within the grace of each other, as the
captures' own timestamps are; spans posted long after they ended, or out of order across a grace, may be judged
otherwise by the two, by design.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from monitor.cli.replay_cmd import replay
from monitor.judge import Judge
from monitor.otlp import parse_json, parse_protobuf
from monitor.otlp._accel import PURE_PYTHON_ENV
from monitor.replay import Replayer, expand_sources, replay_files
from monitor.rules import load_rules
from monitor.verdict import TurnVerdict
from tests.monitor.oracle.oracle import CallResult, TurnResult
from tests.monitor.oracle.published import Labels
from tests.monitor.oracle.scrape import COUNTER_LABELS, Page, assert_counters, parse
from tests.monitor.service.captures import DATA
from tests.monitor.service.conftest import stop_process, wait_for
from tests.monitor.service.http_util import post

TOOLWATCH = str(Path(sys.executable).parent / "toolwatch")
REPO = Path(__file__).resolve().parents[3]
# the C extensions serve runs on unless TOOLWATCH_PURE_PYTHON=1 (decoders, normalizer, assembler, judge plans)
C_MODULES = ("monitor.otlp._cjson", "monitor.otlp._cpb", "monitor.normalize._cgenai", "monitor.assembly._cassembler",
             "monitor.judge._cplan")
GRACE, TURNLESS = "0.2", "0.5"  # seconds, for serve (arrival time) and replay (span time) alike

# The tools the captures call; get_time (MCP) and Weather-get_weather (Semantic Kernel's plugin-qualified name) are
# left out, so they are hallucinated. Expectations keyed on the captures' questions: "Is it warm in Paris?" expects
# no call (its get_weather is spurious); get_forecast and the hand-offs stand in for get_weather (wrong_tool).
RULES = r"""
version: 1
description: The weather agents of the captured frameworks.
catalog:
  tools:
    - name: get_weather
      schema:
        type: object
        properties:
          city: {type: string, minLength: 1}
          unit: {enum: [celsius, fahrenheit]}
        required: [city]
        additionalProperties: false
    - name: get_forecast
      schema:
        type: object
        properties: {city: {type: string}}
        required: [city]
    - name: final_answer
    - name: finish
    - name: add
    - name: transfer_to_agent
    - name: transfer_to_weather_agent
expect:
  - id: warm
    when: {prefix: "Is it warm"}
    none: true
  - id: two-questions
    when: {contains: "2+3"}
    call:
      - tool: get_weather
        args:
          city: {exact: Oslo}
      - tool: add
  - id: weather
    when: {regex: '(?i)\bweather in (\pL+)\?'}
    call:
      - tool: get_weather
        args:
          city: {from_input: '(?i)\bin (\pL+)\?'}
      - {tool: final_answer, min: 0}
      - {tool: finish, min: 0}
  - id: follow-up
    when: {prefix: "And in "}
    call:
      - tool: get_weather
        args:
          city: {from_input: '^And in (\pL+)\?'}
"""


@dataclass
class Replayed:
    rules: Path
    report: dict[str, Any]
    verdicts: list[TurnVerdict]
    agents: list[str]
    tools: frozenset[str]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Replayed:
    folder = tmp_path_factory.mktemp("captures")
    rules = folder / "weather.yaml"
    rules.write_text(RULES, encoding="utf-8")
    out = folder / "report.json"
    res = CliRunner().invoke(replay, [str(DATA), "--rules", str(rules), "--grace", GRACE, "--turnless-timeout",
                                      TURNLESS, "--no-progress", "-q", "--json", str(out)])
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())

    loaded = load_rules([rules])
    verdicts: list[TurnVerdict] = []
    engine = Replayer(Judge(loaded), verdicts.append, grace_s=float(GRACE), turnless_timeout_s=float(TURNLESS))
    replay_files(engine, expand_sources([str(DATA)]))
    engine.finish()
    assert len(verdicts) == report["counts"]["turns"]
    agents = sorted({v.agent for v in verdicts if v.agent})
    return Replayed(rules, report, verdicts, agents, loaded.catalog)


def _result(v: TurnVerdict) -> TurnResult:
    """A replayed verdict as the oracle's TurnResult, which `published.counters` turns into /metrics counters."""
    calls = [CallResult(c.name, c.outcome.value, c.in_catalog, c.schema_valid,
                        frozenset(x.kind.value for x in c.violations), c.args_ok) for c in v.calls]
    return TurnResult(
        agent=v.agent, judged=v.judged, turnless=v.turnless, calls=calls, rule=v.rule,
        missed=[m.tool for m in v.missed], expected_by_tool=Counter(dict(v.expected_by_tool)),
        max_calls=v.max_calls, selection_ok=v.selection_ok, args_ok=v.args_ok, schema_ok=v.schema_ok,
        seq_ok=v.sequence_ok, seq_score=v.sequence_score, forbidden=frozenset(v.forbidden),
        response_ok=v.response_ok, end_to_end=v.end_to_end, over_calling=v.over_calling,
        confusion=list(v.confusion),
    )


def _to_protobuf(line: str) -> bytes:
    """An OTLP JSON export request as protobuf (OTLP JSON writes ids in hex, protobuf's JSON mapping in base64)."""
    doc = json.loads(line)

    def ids(obj: dict[str, Any]) -> None:
        for key in ("traceId", "spanId", "parentSpanId"):
            if obj.get(key):
                obj[key] = base64.b64encode(bytes.fromhex(obj[key])).decode()

    for rs in doc.get("resourceSpans", ()):
        for ss in rs.get("scopeSpans", ()):
            for span in ss.get("spans", ()):
                ids(span)
                for link in span.get("links", ()):
                    ids(link)
    body = json_format.ParseDict(doc, ExportTraceServiceRequest()).SerializeToString()
    assert parse_protobuf(body).spans == parse_json(line.encode()).spans  # the conversion loses nothing
    return bytes(body)


def _bodies(encoding: str) -> list[tuple[bytes, str]]:
    lines = [ln for p in sorted(DATA.glob("*.jsonl")) for ln in p.read_text(encoding="utf-8").splitlines() if ln]
    if encoding == "json":
        return [(ln.encode(), "application/json") for ln in lines]
    return [(_to_protobuf(ln), "application/x-protobuf") for ln in lines]


@dataclass
class Served:
    endpoint: str
    metrics_url: str
    log: Path  # the process's stderr, quoted when a request fails


@pytest.fixture
def serve_process(replayed: Replayed, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    """`toolwatch serve` as a process on the C path or forced onto Python (TOOLWATCH_PURE_PYTHON=1)."""
    if request.param == "c" and any(importlib.util.find_spec(m) is None for m in C_MODULES):
        pytest.skip("the C extensions are not built")
    env = {k: v for k, v in os.environ.items() if k != PURE_PYTHON_ENV}
    # The code under test, the replay's: the console script alone imports the checkout the package was installed
    # from (an editable install), which in another worktree is other code, and may change while this runs.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    if request.param == "python":
        env[PURE_PYTHON_ENV] = "1"
    log = tmp_path / "serve.log"
    with log.open("w", encoding="utf-8") as err:
        proc = subprocess.Popen(
            [TOOLWATCH, "serve", "--rules", str(replayed.rules), "--port", "0", "--metrics-port", "0", "--no-watch",
             "--grace", GRACE, "--turnless-timeout", TURNLESS, "--agent", ",".join(replayed.agents)],
            stderr=err, text=True, env=env,
        )
        try:
            wait_for(lambda: "OTLP/HTTP on" in log.read_text(encoding="utf-8"), timeout=30)
            line = next(ln for ln in log.read_text(encoding="utf-8").splitlines() if "OTLP/HTTP on" in ln)
            endpoint = line.split("OTLP/HTTP on ")[1].split(",")[0].strip()
            yield Served(endpoint, line.split("metrics on ")[1].split(" ")[0].strip(), log)
        finally:
            stop_process(proc)


def _gauge(page_text: str, name: str) -> float:
    return sum(float(ln.split()[-1]) for ln in page_text.splitlines() if ln.startswith(name + "{") or
               ln.startswith(name + " "))


def _settled(metrics_url: str, turns: int, timeout: float = 20.0) -> Page:
    """The /metrics page once nothing is queued or pending and at least `turns` turns were counted."""
    deadline = time.monotonic() + timeout
    while True:
        with urllib.request.urlopen(metrics_url, timeout=10) as resp:
            text = resp.read().decode()
        page = parse(text)
        idle = _gauge(text, "toolwatch_queue_spans") == 0 and _gauge(text, "toolwatch_pending_turns") == 0
        if idle and sum(page.get("toolwatch_turns", {}).values()) >= turns or time.monotonic() > deadline:
            return page
        time.sleep(0.05)


def _sum(page: Page, name: str, **labels: str) -> int:
    """A counter summed over agents (and tools): labels by position as oracle.scrape.COUNTER_LABELS names them."""
    names = COUNTER_LABELS[name]
    return int(sum(v for k, v in page.get(name, {}).items()
                   if all(k[names.index(x)] == want for x, want in labels.items())))


@pytest.mark.parametrize("serve_process", ["c", "python"], indirect=True)
@pytest.mark.parametrize("encoding", ["json", "protobuf"])
def test_serve_publishes_what_replay_reports_for_every_capture(
    replayed: Replayed, serve_process: Served, encoding: str
) -> None:
    for body, ctype in _bodies(encoding):
        status, answer, _ = post(serve_process.endpoint, body, ctype)
        assert status == 200, (answer, serve_process.log.read_text(encoding="utf-8")[-4000:])
    counts = replayed.report["counts"]
    page = _settled(serve_process.metrics_url, counts["turns"])

    outcome = {o: _sum(page, "toolwatch_tool_calls", outcome=o)
               for o in ("correct", "wrong_tool", "spurious", "hallucinated", "unjudged")}
    served = {
        "turns": _sum(page, "toolwatch_turns"),
        "judged_turns": _sum(page, "toolwatch_turns", judged="true"),
        "judged_calls": _sum(page, "toolwatch_judged_calls"),
        "all_calls": sum(outcome.values()),
        "missed": _sum(page, "toolwatch_missed_calls"),
        "expected_calls": _sum(page, "toolwatch_expected_calls"),
        "selection_ok_turns": _sum(page, "toolwatch_turn_checks", check="selection", result="pass"),
        "end_to_end_turns": _sum(page, "toolwatch_turn_checks", check="end_to_end", result="pass"),
        "schema_checked_calls": _sum(page, "toolwatch_schema_checked_calls"),
        "schema_valid_calls": _sum(page, "toolwatch_schema_valid_calls"),
        "args_checked_calls": _sum(page, "toolwatch_argument_checked_calls"),
        "args_ok_calls": _sum(page, "toolwatch_argument_ok_calls"),
        "forbidden_calls": _sum(page, "toolwatch_forbidden_calls"),
        **outcome,
    }
    assert served == {k: counts[k] for k in served}
    # every outcome and a schema violation occur, so the comparison covers them
    assert all(outcome.values()) and served["schema_valid_calls"] < served["schema_checked_calls"]

    confusion: Counter[tuple[str, str]] = Counter()
    for (_, e, a), n in page.get("toolwatch_confusion", {}).items():
        confusion[(e, a)] += int(n)
    assert +confusion == {(e, a): n for e, a, n in replayed.report["confusion"]}

    # per agent and tool, schema violation kinds and rule failures included
    assert_counters(page, [([_result(v) for v in replayed.verdicts], Labels(replayed.tools, replayed.agents))])
