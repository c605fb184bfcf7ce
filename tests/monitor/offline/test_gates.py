"""Gates: thresholds under/over, absent figures, regression against a baseline; exit codes of the CLI."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from monitor.cli.replay_cmd import replay
from monitor.report import (
    GateFailure,
    Threshold,
    failures_of,
    gate_results,
    parse_gate,
    parse_threshold,
    skipped_comparisons,
)
from monitor.report.figures import HIGHER_IS_BETTER, NEUTRAL, grade
from tests.monitor.offline.agents import SUPPORT_INPUTS, support_agent
from tests.monitor.offline.conftest import capture_spans, write_span_files


@pytest.mark.parametrize(
    ("spec", "figure", "value"),
    [
        ("accuracy=0.95", "tool_call_accuracy", 0.95),
        ("schema_adherence=99%", "schema_adherence", 0.99),
        ("E2E=0.5", "end_to_end_accuracy", 0.5),
        ("spurious-rate=0", "spurious_rate", 0.0),
        ("pass^k=0.8", "pass_hat_k", 0.8),
    ],
)
def test_parse_threshold(spec: str, figure: str, value: float) -> None:
    assert parse_threshold(spec) == Threshold(figure, pytest.approx(value))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spec", "message"),
    [("accuracy", "FIGURE=VALUE"), ("acuracy=0.9", "unknown figure"), ("accuracy=high", "not a number"),
     ("accuracy=1.5", "outside [0, 1]")],
)
def test_parse_threshold_errors(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_threshold(spec)


def _failed(figures: Mapping[str, float | None], **gates: Any) -> list[GateFailure]:
    """The failed gates, as emit_report finds them."""
    return failures_of(gate_results(figures, **gates))


def test_failed_gates() -> None:
    figures = {"tool_call_accuracy": 0.9, "schema_adherence": 1.0, "spurious_rate": 0.08, "sequence_accuracy": None}
    fails = _failed(figures, fail_under=[Threshold("tool_call_accuracy", 0.95), Threshold("schema_adherence", 0.99),
                                             Threshold("sequence_accuracy", 0.5)],
                        fail_over=[Threshold("spurious_rate", 0.05)])
    assert [f.figure for f in fails] == ["tool_call_accuracy", "sequence_accuracy", "spurious_rate"]
    assert "90.00% < 95.00%" in fails[0].message and "absent" in fails[1].message
    assert _failed(figures, fail_under=[Threshold("tool_call_accuracy", 0.9)]) == []  # equal passes


def test_gate_results_list_every_gate_passed_or_not() -> None:
    """What the JUnit report shows: each threshold, then each baseline figure compared, named after the gate, the
    passed ones with their measured value; the failed ones are failures_of's, in its order."""

    figures = {"tool_call_accuracy": 0.9, "spurious_rate": 0.04, "sequence_accuracy": None}
    under = [Threshold("tool_call_accuracy", 0.95), Threshold("sequence_accuracy", 0.5)]
    over = [Threshold("spurious_rate", 0.05)]
    baseline = {"tool_call_accuracy": 0.91, "spurious_rate": 0.01}
    results = gate_results(figures, fail_under=under, fail_over=over, baseline=baseline, max_drop=0.02)
    assert [(r.name, r.passed) for r in results] == [
        ("tool_call_accuracy >= 95.00%", False), ("sequence_accuracy >= 50.00%", False),
        ("spurious_rate <= 5.00%", True), ("tool_call_accuracy: at most 2.00% worse than the baseline", True),
        ("spurious_rate: at most 2.00% worse than the baseline", False)]
    assert results[2].message == "Spurious-call rate (spurious_rate) 4.00% <= 5.00%"
    assert results[3].message == "Tool call accuracy (tool_call_accuracy) 91.00% -> 90.00% (max drop 2.00%)"
    fails = _failed(figures, fail_under=under, fail_over=over, baseline=baseline, max_drop=0.02)
    assert [f.message for f in fails] == [r.message for r in results if not r.passed]


def test_baseline_regression_direction() -> None:
    base = {"tool_call_accuracy": 0.95, "spurious_rate": 0.02, "missed_rate": 0.1, "schema_adherence": None}
    now = {"tool_call_accuracy": 0.94, "spurious_rate": 0.05, "missed_rate": 0.0, "schema_adherence": 0.5}
    fails = _failed(now, baseline=base, max_drop=0.02)
    assert [f.figure for f in fails] == ["spurious_rate"]  # a rate going up is worse; down is better
    assert [f.figure for f in _failed(now, baseline=base, max_drop=0.0)] == ["tool_call_accuracy", "spurious_rate"]
    # computed now but absent (zero denominator): still a failure
    absent = _failed(dict.fromkeys(base), baseline=base)
    assert [f.figure for f in absent] == ["tool_call_accuracy", "spurious_rate", "missed_rate"]
    assert "was 95.00% in the baseline, now absent" in absent[0].message


LOWER_IS_BETTER = ["spurious_rate", "wrong_tool_rate", "hallucinated_rate", "missed_rate", "over_calling_rate"]


def test_lower_is_better_figures() -> None:
    assert sorted(k for k, up in HIGHER_IS_BETTER.items() if not up) == sorted(LOWER_IS_BETTER)


@pytest.mark.parametrize("figure", sorted(HIGHER_IS_BETTER))
def test_each_gate_takes_only_its_direction(figure: str) -> None:
    up = HIGHER_IS_BETTER[figure]
    assert parse_gate(f"{figure}=0.5", over=not up) == Threshold(figure, 0.5)
    right = "--fail-under" if up else "--fail-over"
    with pytest.raises(ValueError, match=f"use {right} {figure.replace('^', '.')}=0.5 "):
        parse_gate(f"{figure}=0.5", over=up)


@pytest.mark.parametrize("figure", sorted(HIGHER_IS_BETTER))
def test_baseline_regression_direction_of_every_figure(figure: str) -> None:
    sign = 1 if HIGHER_IS_BETTER[figure] else -1  # the direction in which the figure gets better
    base = {figure: 0.5}
    worse, better = {figure: 0.5 - sign * 0.1}, {figure: 0.5 + sign * 0.3}
    # (pass^k is compared only at the same k)
    (fail,) = _failed(worse, baseline=base, max_drop=0.05, k=2, baseline_k=2)
    assert fail.figure == figure and "worse by 10.00%" in fail.message
    assert _failed(worse, baseline=base, max_drop=0.1, k=2, baseline_k=2) == []
    assert _failed(better, baseline=base, max_drop=0.0, k=2, baseline_k=2) == []


def test_baseline_figure_not_computed_now_is_skipped() -> None:
    base = {"tool_call_accuracy": 0.9, "pass_rate": 0.8, "pass_hat_k": 0.7, "scenario_pass_rate": None}
    now = {"tool_call_accuracy": 0.9}  # a replay: no pass rate, no pass^k
    assert _failed(now, baseline=base) == []
    assert skipped_comparisons(now, base) == [
        "Pass rate (all trials) (pass_rate) is in the baseline but not computed by this run (eval --dataset computes "
        "it)",
        "pass^k (chance that k trials of a case all pass) (pass_hat_k) is in the baseline but not computed by this "
        "run (eval --dataset computes it with --trials 2 or more)",
    ]
    # a gate on a figure this command does not compute still fails, and says so
    (fail,) = _failed(now, fail_under=[Threshold("pass_rate", 0.5)])
    assert "(pass_rate) is not computed by this run (eval --dataset computes it), gate < 50.00%" in fail.message


def test_figure_computed_now_but_not_in_the_baseline_is_said_not_compared() -> None:
    """The other side of a figure missing in one report: a baseline without it (a replay's, beside an eval; an eval of
    --trials 1, beside --trials 3) or with it absent (no data then) cannot be regressed from, and a line says so, as
    for a baseline figure this command does not compute, instead of a silent `All gates passed.`."""
    base = {"tool_call_accuracy": 0.9, "response_compliance": None}
    now = {"tool_call_accuracy": 0.9, "response_compliance": 0.5, "pass_rate": 0.4, "pass_hat_k": 0.3,
           "sequence_accuracy": None}
    assert _failed(now, baseline=base, max_drop=0.0, k=3) == []
    assert skipped_comparisons(now, base, k=3) == [
        "Response format compliance (response_compliance) is absent (no data) in the baseline",
        "Pass rate (all trials) (pass_rate) is not in the baseline",
        "pass^k (chance that k trials of a case all pass) (pass_hat_k) is not in the baseline",
    ]
    assert skipped_comparisons(now, now, k=3, baseline_k=3) == []


def test_pass_hat_k_of_different_k_is_not_compared() -> None:
    base, now = {"pass_hat_k": 0.9, "pass_rate": 0.5}, {"pass_hat_k": 0.5, "pass_rate": 0.5}
    assert _failed(now, baseline=base, k=2, baseline_k=3) == []
    # pass^k alone, of another k: nothing compared, which fails (a gate passing on nothing)
    (nothing,) = _failed({"pass_hat_k": 0.5}, baseline={"pass_hat_k": 0.9}, k=2, baseline_k=3)
    assert nothing.figure == "baseline"
    assert skipped_comparisons(now, base, k=2, baseline_k=3) == [
        "pass^k (chance that k trials of a case all pass) (pass_hat_k): pass^3 in the baseline, pass^2 now: "
        "different k are not comparable"
    ]
    assert _failed(now, baseline=base, k=None, baseline_k=3) == []  # an unknown k is not assumed equal
    assert "the baseline does not record its k" in skipped_comparisons(now, base, k=3, baseline_k=None)[0]
    (fail,) = _failed(now, baseline=base, k=3, baseline_k=3)
    assert fail.figure == "pass_hat_k" and "90.00% -> 50.00%" in fail.message
    assert skipped_comparisons(now, base, k=3, baseline_k=3) == []


@pytest.fixture(scope="module")
def span_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_span_files(capture_spans(support_agent, SUPPORT_INPUTS), tmp_path_factory.mktemp("g"))["jsonl"]


def _run(span_file: Path, rules: Path, *extra: str) -> tuple[int, str]:
    res = CliRunner().invoke(replay, [str(span_file), "--rules", str(rules), "--no-progress", "-q", *extra])
    return res.exit_code, res.output


def test_cli_fail_under_lists_failed_figures(span_file: Path, support_rules: Path) -> None:
    code, out = _run(span_file, support_rules, "--fail-under", "accuracy=0.95", "--fail-under",
                     "schema_adherence=0.99", "--fail-under", "selection=0.2")
    assert code == 1
    assert "FAILED 2 gate(s)" in out
    assert "Tool call accuracy (tool_call_accuracy) 55.56% < 95.00%" in out
    assert "Schema adherence (schema_adherence) 87.50% < 99.00%" in out
    assert "selection_accuracy" not in out.split("FAILED")[1]
    code, out = _run(span_file, support_rules, "--fail-under", "accuracy=0.5", "--fail-over", "hallucinated_rate=0.2")
    assert code == 0 and "All gates passed." in out


def test_cli_bad_gate_is_a_usage_error(span_file: Path, support_rules: Path) -> None:
    code, out = _run(span_file, support_rules, "--fail-under", "acc=0.9")
    assert code == 2 and "unknown figure" in out


def test_cli_gate_of_the_wrong_direction_is_a_usage_error(span_file: Path, support_rules: Path) -> None:
    # the spurious rate of these spans is 22.22%: `--fail-under spurious_rate=0.5` used to fail on it
    code, out = _run(span_file, support_rules, "--fail-under", "spurious_rate=0.5")
    assert code == 2 and "use --fail-over spurious_rate=0.5 (exit 1 when it is above 0.5)" in out
    code, out = _run(span_file, support_rules, "--fail-under", "missed=50%")
    assert code == 2 and "use --fail-over missed_rate=50%" in out
    code, out = _run(span_file, support_rules, "--fail-over", "accuracy=0.9")
    assert code == 2 and "use --fail-under tool_call_accuracy=0.9 (exit 1 when it is below 0.9)" in out
    code, out = _run(span_file, support_rules, "--fail-over", "spurious_rate=0.2")
    assert code == 1 and "Spurious-call rate (spurious_rate) 22.22% > 20.00%" in out
    code, out = _run(span_file, support_rules, "--fail-over", "spurious_rate=0.25")
    assert code == 0 and "All gates passed." in out


@pytest.mark.parametrize("value", ["0.02", "0"])
def test_cli_max_drop_without_baseline_is_a_usage_error(span_file: Path, support_rules: Path, value: str) -> None:
    code, out = _run(span_file, support_rules, "--max-drop", value, "--fail-under", "accuracy=0.5")
    assert code == 2 and "--max-drop applies to --baseline" in out and "Tool call accuracy:" not in out


def test_cli_eval_baseline_with_a_replay(span_file: Path, support_rules: Path, tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    assert _run(span_file, support_rules, "--json", str(base))[0] == 0
    data = json.loads(base.read_text())
    assert data["k"] is None  # a replay has no pass^k
    data["figures"].update(pass_rate=0.9, pass_hat_k=0.8)  # what an eval report adds
    data["k"] = 3
    base.write_text(json.dumps(data))
    code, out = _run(span_file, support_rules, "--baseline", str(base))
    assert code == 0, out
    assert "Not compared with the baseline: Pass rate (all trials) (pass_rate) is in the baseline but not computed " \
           "by this run (eval --dataset computes it)" in out
    assert "(pass_hat_k) is in the baseline but not computed by this run (eval --dataset computes it with --trials " \
           "2 or more)" in out
    assert "All gates passed." in out
    data["figures"]["tool_call_accuracy"] = 0.6  # the figures replay does compute are still compared
    base.write_text(json.dumps(data))
    code, out = _run(span_file, support_rules, "--baseline", str(base), "--max-drop", "0.02")
    assert code == 1 and "FAILED 1 gate(s)" in out and "60.00% -> 55.56%" in out


def test_cli_baseline(span_file: Path, support_rules: Path, tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    code, _ = _run(span_file, support_rules, "--json", str(base))
    assert code == 0
    code, out = _run(span_file, support_rules, "--baseline", str(base))
    assert code == 0 and "All gates passed." in out
    data = json.loads(base.read_text())
    data["figures"]["tool_call_accuracy"] = 0.6  # the baseline was better by 4.4 points
    base.write_text(json.dumps(data))
    code, out = _run(span_file, support_rules, "--baseline", str(base), "--max-drop", "0.02")
    assert code == 1 and "60.00% -> 55.56%" in out
    code, _ = _run(span_file, support_rules, "--baseline", str(base), "--max-drop", "0.05")
    assert code == 0
    base.write_text("{}")
    code, out = _run(span_file, support_rules, "--baseline", str(base))
    assert code == 2 and "not a toolwatch report" in out


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_cli_baseline_with_a_figure_that_is_no_number_is_refused(
    span_file: Path, support_rules: Path, tmp_path: Path, value: str
) -> None:
    """Python's JSON reader takes NaN and Infinity, and every comparison with NaN is false: a baseline figure of NaN
    passed every regression gate without a word. Like any other bad baseline, it is refused (exit 2)."""
    base = tmp_path / "base.json"
    base.write_text('{"figures": {"tool_call_accuracy": ' + value + "}}")
    code, out = _run(span_file, support_rules, "--baseline", str(base), "--max-drop", "0")
    assert code == 2 and f"figure 'tool_call_accuracy' is {float(value)!r}, expected a number or null" in out


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'{"figures": {"tool_call_accuracy": 1' + b"0" * 400 + b"}}", "figure 'tool_call_accuracy' is 1000"),
        (b'{"figures": {"tool_call_accuracy": 1' + b"0" * 5000 + b"}}", "baseline is not JSON: Exceeds the limit"),
        (b'\xff\xfe{"figures": {}}', "baseline is not UTF-8 text"),
        (b'{"figures": {}, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "baseline is not a toolwatch report: "
         "nested too deeply"),  # RecursionError in the JSON decoder
    ],
    ids=["integer too large for a float", "integer too long for int()", "not UTF-8", "nested too deeply"],
)
def test_cli_baseline_that_python_cannot_read_as_figures_is_refused(
    span_file: Path, support_rules: Path, tmp_path: Path, content: bytes, says: str
) -> None:
    """An integer figure too large for a float (OverflowError), one of more digits than int() converts (ValueError)
    and a file that is not UTF-8 (UnicodeDecodeError) escaped load_baseline as a crash with a traceback; like any
    other bad baseline, they are refused (exit 2)."""
    base = tmp_path / "base.json"
    base.write_bytes(content)
    code, out = _run(span_file, support_rules, "--baseline", str(base))
    assert code == 2 and says in out, out


def test_cli_baseline_past_the_size_limit_is_refused_unread(span_file: Path, support_rules: Path, tmp_path: Path
                                                            ) -> None:
    """The baseline was read whole, whatever its size: a device such as /dev/zero ran into a MemoryError traceback
    (or the OOM killer). Past MAX_BASELINE_BYTES it is read in chunks, value by value: what is not a report is
    refused at the first thing that is not JSON, here right after the object, unread."""
    from monitor.report.model import MAX_BASELINE_BYTES

    base = tmp_path / "base.json"
    with base.open("wb") as fh:
        fh.write(b'{"figures": {}}')
        fh.truncate(MAX_BASELINE_BYTES + 1)  # sparse: no disk used
    code, out = _run(span_file, support_rules, "--baseline", str(base))
    assert code == 2 and f"{base}: baseline is not JSON: Extra data (at character 15)" in out, out


def _big_report(cases: int) -> str:
    """The `--json` of an eval-like report keeping `cases` per-case results, each with a 400-character non-ASCII input
    (JSON writes it as \\u escapes: 6 bytes a character): 100,000 of them make 260 MB."""
    from monitor.report.builder import ReportBuilder
    from monitor.verdict import CallVerdict, Outcome, TurnVerdict

    builder = ReportBuilder()
    call = CallVerdict(0, "search", "c", Outcome.CORRECT, True, 0, True, (), True)
    for i in range(cases):
        builder.add(
            TurnVerdict("a", "t", "s", "語" * 400, True, False, "r1", 0, (call,), (), 1, 1, True, True, True, None,
                        None, (), None, i % 4 != 0, False, (("search", "search"),), "why", (("search", 1),)),
            case_id=f"case-{i}",
        )
    report = builder.build("eval", "t")
    report.k = 3
    return report.to_json()


def test_baseline_written_by_json_over_the_whole_read_bound_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """eval and probe keep up to 100,000 per-case results in their `--json` report: with non-ASCII inputs that is
    260 MB, past the 64 MiB to which a baseline was read whole, and `--baseline` refused the tool's own report
    ("over the byte limit ... give the file `--json` wrote"). The bound is made small here, the report too."""
    from monitor.report import model

    text = _big_report(40)
    monkeypatch.setattr(model, "MAX_BASELINE_BYTES", len(text) // 8)
    base = tmp_path / "base.json"
    base.write_text(text, encoding="utf-8")
    want = json.loads(text)
    got = model.load_baseline(base)
    assert got.figures == want["figures"] and got.figures["end_to_end_accuracy"] == 0.75 and got.k == 3


@pytest.mark.parametrize(
    ("tail", "says"),
    [
        (', "x": "' + "y" * 20_000 + '"}', "over the 4096 byte limit"),  # a value past the bound: not built
        (', "cases": [1, 2,, 3]}', "baseline is not JSON: Expecting value"),
        ("} x", "baseline is not JSON: Extra data"),
        (', "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        (', "figures": 1', "baseline is not JSON"),  # cut short
    ],
    ids=["value past the bound", "bad item", "extra data", "nested too deeply", "cut short"],
)
def test_baseline_over_the_whole_read_bound_that_is_no_report_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tail: str, says: str
) -> None:
    from monitor.report import model

    monkeypatch.setattr(model, "MAX_BASELINE_BYTES", 4096)
    base = tmp_path / "base.json"
    base.write_text('{"k": 2, "cases": [' + ",".join(['{"name": "n", "detail": "' + "d" * 100 + '"}'] * 100) + "]"
                    + tail, encoding="utf-8")
    with pytest.raises(model.BaselineError, match=says):
        model.load_baseline(base)


def test_cli_a_report_path_that_cannot_be_written_exits_2_not_as_a_failed_gate(
    span_file: Path, support_rules: Path, tmp_path: Path
) -> None:
    """`--json` into a path under a file exited 1, the code of a failed gate, so CI read a bad option as a regression
    (and the gates were never checked). Input and option errors exit 2."""
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    code, out = _run(span_file, support_rules, "--json", str(blocker / "report.json"), "--fail-under", "accuracy=0.1")
    assert code == 2, out
    assert f"Error: cannot write {blocker / 'report.json'}: Not a directory" in out


def test_cli_gate_on_a_figure_not_computed_says_so_and_why_and_fails(span_file: Path, support_rules: Path) -> None:
    """A gate on a figure with a zero denominator fails (documented: a gate passing on no data is worse than none),
    but it read as if the figure had been measured low; now it says the figure was not computed, and why."""
    code, out = _run(span_file, support_rules, "--fail-under", "sequence=0.5", "--fail-under", "response=90%",
                     "--fail-under", "accuracy=0.5")
    assert code == 1
    gates = out.split("FAILED 2 gate(s):\n")[1].splitlines()
    assert gates == [
        "  - Sequence accuracy (sequence_accuracy) is absent, not computed: no turn with ordering constraints in this "
        "run (a zero denominator); a gate on a figure without data fails (gate < 50.00%)",
        "  - Response format compliance (response_compliance) is absent, not computed: no turn with response checks "
        "in this run (a zero denominator); a gate on a figure without data fails (gate < 90.00%)",
    ]
    help_text = " ".join(CliRunner().invoke(replay, ["--help"], terminal_width=200).output.split())
    assert "A figure the run could not compute (absent: zero denominator) fails too, said so." in help_text


def test_every_figure_says_what_it_needs_to_be_computed() -> None:
    from monitor.report.figures import FIGURE_KEYS, NEEDS

    assert set(NEEDS) == FIGURE_KEYS
    for figure in FIGURE_KEYS:
        up = HIGHER_IS_BETTER.get(figure, True)  # the usage rate (no better direction) takes either gate
        (fail,) = _failed({figure: None}, fail_under=[Threshold(figure, 0.5)] if up else [],
                              fail_over=[] if up else [Threshold(figure, 0.5)])
        assert f"({figure}) is absent, not computed: {NEEDS[figure]} in this run (a zero denominator)" in fail.message


def test_tool_usage_rate_has_no_better_direction() -> None:
    """Fewer calls is better on cases that expect none, more on cases that need them (and those are the missed and
    spurious/over-calling rates' business): either absolute gate takes the usage rate, a baseline does not compare
    it and says so, and reports do not colour it good or bad."""
    assert "tool_usage_rate" not in HIGHER_IS_BETTER and "tool_usage_rate" in NEUTRAL
    assert parse_gate("tool_usage=0.5", over=False) == Threshold("tool_usage_rate", 0.5)
    assert parse_gate("tool_usage=0.5", over=True) == Threshold("tool_usage_rate", 0.5)
    now = {"tool_call_accuracy": 0.9, "tool_usage_rate": 0.2}
    (under,) = _failed(now, fail_under=[Threshold("tool_usage_rate", 0.3)])
    (over,) = _failed(now, fail_over=[Threshold("tool_usage_rate", 0.1)])
    assert "20.00% < 30.00%" in under.message and "20.00% > 10.00%" in over.message
    base = {"tool_call_accuracy": 0.9, "tool_usage_rate": 0.9}
    assert _failed(now, baseline=base, max_drop=0.0) == []
    assert _failed({**now, "tool_usage_rate": 1.0}, baseline={**base, "tool_usage_rate": 0.0}) == []
    assert skipped_comparisons(now, base) == [
        "Tool usage rate (tool_usage_rate) has no better direction and is not compared with the baseline "
        "(gate it with --fail-under or --fail-over)"
    ]
    assert skipped_comparisons({"tool_call_accuracy": 0.9}, {"tool_call_accuracy": 0.9}) == []
    assert {grade("tool_usage_rate", v) for v in (0.0, 0.5, 1.0)} == {"neutral"}


@pytest.mark.parametrize(
    ("figures", "skipped"),
    [
        ({"pass_rate": 0.9}, "Pass rate (all trials) (pass_rate) is in the baseline but not computed by this run"),
        ({"tool_call_acuracy": 0.9}, "'tool_call_acuracy' in the baseline is not a figure toolwatch reports"),
        ({"tool_call_accuracy": None}, "Tool call accuracy (tool_call_accuracy) is absent (no data) in the baseline"),
    ],
    ids=["figure this command does not compute", "misspelt figure", "figure absent in the baseline"],
)
def test_cli_baseline_that_compares_nothing_fails(
    span_file: Path, support_rules: Path, tmp_path: Path, figures: dict[str, Any], skipped: str
) -> None:
    """A baseline none of whose figures this run could compare (another command's, a misspelt key, absent values)
    printed `All gates passed.` and exited 0: a regression gate that compared nothing passed on nothing. It fails,
    saying so, and each baseline figure not compared is listed with why (a key that is no figure too)."""
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"figures": figures}), encoding="utf-8")
    code, out = _run(span_file, support_rules, "--baseline", str(base), "--max-drop", "0.02")
    assert code == 1, out
    assert "All gates passed." not in out
    assert "FAILED 1 gate(s):\n  - No figure of the baseline could be compared with this run" in out, out
    assert f"Not compared with the baseline: {skipped}" in out, out
    # with a figure compared, the others are still listed, and the gate is that figure's
    base.write_text(json.dumps({"figures": {**figures, "selection_accuracy": 0.2}}), encoding="utf-8")
    code, out = _run(span_file, support_rules, "--baseline", str(base), "--max-drop", "0.02")
    assert code == 0 and "All gates passed." in out and f"Not compared with the baseline: {skipped}" in out, out


def test_a_baseline_comparing_nothing_fails_beside_thresholds_that_pass() -> None:
    (fail,) = _failed({"tool_call_accuracy": 0.9}, fail_under=[Threshold("tool_call_accuracy", 0.5)],
                      baseline={"x": 0.9})
    assert fail.figure == "baseline" and "No figure of the baseline could be compared" in fail.message
    assert skipped_comparisons({"tool_call_accuracy": 0.9}, {"x": 0.9}) == [
        "'x' in the baseline is not a figure toolwatch reports: not compared",
        "Tool call accuracy (tool_call_accuracy) is not in the baseline",
    ]


@pytest.mark.parametrize("value", ["95", "-0.1", "1.0000001"])
def test_cli_baseline_figure_outside_zero_one_is_refused(
    span_file: Path, support_rules: Path, tmp_path: Path, value: str
) -> None:
    """Every figure is a ratio in [0, 1]; a baseline of 95 (a percentage written by hand) was taken, and every run
    passed against it (or, for a rate, failed). Refused like any other bad baseline (exit 2)."""
    base = tmp_path / "base.json"
    base.write_text('{"figures": {"tool_call_accuracy": ' + value + "}}", encoding="utf-8")
    code, out = _run(span_file, support_rules, "--baseline", str(base))
    assert code == 2 and f"figure 'tool_call_accuracy' is {float(value)!r}, outside [0, 1]" in out, out


@pytest.mark.parametrize("option", ["--json", "--markdown", "--junit", "--html"])
def test_cli_a_report_path_that_is_a_directory_is_refused_before_the_run(
    span_file: Path, support_rules: Path, tmp_path: Path, option: str
) -> None:
    """A report path that cannot be written was found only after the run, and its error replaced the summary and the
    gates' outcome (a long eval lost). It is checked first: exit 2, nothing run."""
    code, out = _run(span_file, support_rules, option, str(tmp_path), "--fail-under", "accuracy=0.1")
    assert code == 2 and f"cannot write {tmp_path}: Is a directory" in out, out
    assert "Tool call accuracy:" not in out
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    code, out = _run(span_file, support_rules, option, str(blocker / "sub" / "r.out"))
    assert code == 2 and f"cannot write {blocker / 'sub' / 'r.out'}: Not a directory" in out, out
    assert "Tool call accuracy:" not in out and not (tmp_path / "sub").exists()


def test_cli_a_report_write_that_fails_late_keeps_the_summary_and_the_gates(
    span_file: Path, support_rules: Path, tmp_path: Path
) -> None:
    """A write that fails after the run (/dev/full: a disk that fills) still prints the summary and every gate's
    outcome, writes the other forms, and exits 2 naming the path."""
    md = tmp_path / "r.md"
    code, out = _run(span_file, support_rules, "--json", "/dev/full", "--markdown", str(md),
                     "--fail-under", "accuracy=0.95")
    assert code == 2, out
    assert "Tool call accuracy:" in out and "FAILED 1 gate(s)" in out
    assert "cannot write /dev/full: No space left on device" in out
    assert "Tool call accuracy" in md.read_text(encoding="utf-8")


def test_cli_two_reports_to_one_path_is_a_usage_error(span_file: Path, support_rules: Path, tmp_path: Path) -> None:
    """`--json r --markdown r` wrote the JSON, then the Markdown over it."""
    path = tmp_path / "r"
    code, out = _run(span_file, support_rules, "--json", str(path), "--markdown", str(tmp_path / "." / "r"))
    assert code == 2 and f"--json and --markdown both write {tmp_path / '.' / 'r'}" in out and not path.exists(), out


def test_a_gate_message_shows_the_decimals_that_tell_the_value_from_the_threshold() -> None:
    """Rounded to two decimals, 94.999% failed a gate at 95% as `95.00% < 95.00%`, and a regression from 95% to
    94.999% read `95.00% -> 95.00%`: lines that contradict themselves. More decimals are shown until they differ."""
    (fail,) = _failed({"tool_call_accuracy": 0.94999}, fail_under=[Threshold("tool_call_accuracy", 0.95)])
    assert fail.message == "Tool call accuracy (tool_call_accuracy) 94.999% < 95.000%"
    (fail,) = _failed({"spurious_rate": 0.0500001}, fail_over=[Threshold("spurious_rate", 0.05)])
    assert fail.message == "Spurious-call rate (spurious_rate) 5.00001% > 5.00000%"
    (fail,) = _failed({"tool_call_accuracy": 0.94999}, baseline={"tool_call_accuracy": 0.95}, max_drop=0.0)
    assert "95.000% -> 94.999%" in fail.message
    (ok,) = gate_results({"tool_call_accuracy": 0.9}, fail_under=[Threshold("tool_call_accuracy", 0.5)])
    assert ok.message == "Tool call accuracy (tool_call_accuracy) 90.00% >= 50.00%"  # two decimals when they differ
    (same,) = gate_results({"tool_call_accuracy": 0.95}, fail_under=[Threshold("tool_call_accuracy", 0.95)])
    assert same.passed and same.message.endswith("95.00% >= 95.00%")


def test_cli_a_report_path_through_a_dangling_link_or_naming_a_directory_is_refused_before_the_run(
    span_file: Path, support_rules: Path, tmp_path: Path
) -> None:
    """A path under a symbolic link to nowhere passed the check (the link reads as missing), the run went, and the
    write failed after it ('File exists'); `newdir/` wrote a file named newdir."""
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "x")
    code, out = _run(span_file, support_rules, "--json", str(tmp_path / "dangling" / "r.json"))
    assert code == 2 and "Tool call accuracy:" not in out, out
    assert f"cannot write {tmp_path / 'dangling' / 'r.json'}: {tmp_path / 'dangling'} is a link to nothing" in out
    code, out = _run(span_file, support_rules, "--json", f"{tmp_path / 'newdir'}/")
    assert code == 2 and "Tool call accuracy:" not in out and not (tmp_path / "newdir").exists(), out
    assert f"cannot write {tmp_path / 'newdir'}/: a directory, give a file name" in out, out


def test_a_baseline_key_that_is_no_figure_may_hold_any_number(span_file: Path, support_rules: Path,
                                                             tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"figures": {"turns": 120, "tool_call_accuracy": 0.5}}), encoding="utf-8")
    code, out = _run(span_file, support_rules, "--baseline", str(base))
    assert code == 0 and "'turns' in the baseline is not a figure toolwatch reports: not compared" in out, out


def test_a_gate_failing_by_a_hair_still_shows_the_difference() -> None:
    (fail,) = _failed({"tool_call_accuracy": 0.95 - 2e-12}, fail_under=[Threshold("tool_call_accuracy", 0.95)])
    measured, threshold = fail.message.split(") ")[1].split(" < ")
    assert measured != threshold, fail.message


def _partial_report(span_file: Path, support_rules: Path, tmp_path: Path, signal: str) -> Path:
    """The `--json` of a replay's report, marked as eval and probe mark a run a signal stopped (a partial report)."""
    from monitor.report import Interruption

    whole = tmp_path / "whole.json"
    assert _run(span_file, support_rules, "--json", str(whole))[0] == 0
    data = json.loads(whole.read_text())
    stopped = Interruption.of(2, 4, signal=signal)
    data["interrupted"] = {"completed": stopped.completed, "planned": stopped.planned, "unit": stopped.unit,
                           "message": stopped.message, "signal": stopped.signal}
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps(data, indent=2))
    return partial


@pytest.mark.parametrize("signal", ["SIGINT", "SIGTERM"])
def test_cli_a_partial_report_as_baseline_is_refused(span_file: Path, support_rules: Path, tmp_path: Path,
                                                     signal: str) -> None:
    """A report of an eval or probe stopped by Ctrl-C or SIGTERM has the figures of the runs done before it: compared
    as a baseline, a whole run was gated against part of one (and passed or failed on the runs it left out). It is
    refused (exit 2), saying why and what to give instead."""
    partial = _partial_report(span_file, support_rules, tmp_path, signal)
    code, out = _run(span_file, support_rules, "--baseline", str(partial))
    by = "Ctrl-C" if signal == "SIGINT" else "SIGTERM"
    assert code == 2, out
    assert (f"{partial}: a partial report (2 of 4 runs, stopped by {by}): its figures are of the runs done before "
            "the stop; give --baseline the report of a run that ended") in " ".join(out.split()), out
    assert "Traceback" not in out


def test_a_partial_report_over_the_whole_read_bound_is_refused(span_file: Path, support_rules: Path,
                                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A baseline read in chunks (past MAX_BASELINE_BYTES) keeps its `interrupted` member too."""
    from monitor.report import model

    partial = _partial_report(span_file, support_rules, tmp_path, "SIGINT")
    monkeypatch.setattr(model, "MAX_BASELINE_BYTES", 1024)
    assert partial.stat().st_size > 4 * 1024
    with pytest.raises(model.BaselineError, match="a partial report"):
        model.load_baseline(partial)


@pytest.mark.parametrize("keep", [0.3, 0.5, 0.9, -1])
@pytest.mark.parametrize("bound", [None, 1024], ids=["read whole", "read in chunks"])
def test_cli_a_report_cut_short_as_baseline_says_so(span_file: Path, support_rules: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch, keep: float,
                                                    bound: int | None) -> None:
    """A report cut short (a write that stopped: the disk full, the writer killed) was refused as `not JSON:
    Expecting ',' delimiter` or `Unterminated string` at some line: true, but not what happened. The error says the
    file ends before its JSON does, on one line, with no traceback (exit 2)."""
    from monitor.report import model

    whole = tmp_path / "whole.json"
    assert _run(span_file, support_rules, "--json", str(whole))[0] == 0
    text = whole.read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: int(len(text) * keep)] if keep > 0 else text.rstrip()[:-1])
    if bound is not None:
        monkeypatch.setattr(model, "MAX_BASELINE_BYTES", bound)
    code, out = _run(span_file, support_rules, "--baseline", str(cut))
    assert code == 2, out
    (line,) = [x for x in out.splitlines() if x.startswith("Error: ")]
    assert f"{cut}" in line and "ends before its JSON does: cut short" in line, out
    assert "Traceback" not in out


def test_cli_an_empty_baseline_says_so(span_file: Path, support_rules: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("")
    code, out = _run(span_file, support_rules, "--baseline", str(empty))
    assert code == 2 and f"{empty}: baseline is empty" in out, out


@pytest.mark.parametrize("under", [False, True], ids=["the link", "under it"])
def test_cli_a_report_path_through_a_symbolic_link_loop_is_refused_before_the_run(
    span_file: Path, support_rules: Path, tmp_path: Path, under: bool
) -> None:
    """A link to a link to it: the check read the path as missing in a writable directory and passed it; the run
    went, and the write failed after it ('Too many levels of symbolic links'). Under such a link it was called a link
    to nothing."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    path = tmp_path / "a" / "r.json" if under else tmp_path / "a"
    code, out = _run(span_file, support_rules, "--json", str(path))
    assert code == 2 and "Tool call accuracy:" not in out, out
    assert f"cannot write {path}: Too many levels of symbolic links (--json)" in out, out



@pytest.mark.parametrize("cut_value", ["nu", "tr", "fals", "0.", "1e", "1e-", "-"])
@pytest.mark.parametrize("bound", [None, 1024], ids=["read whole", "read in chunks"])
def test_cli_a_report_cut_inside_a_value_as_baseline_says_it_is_cut_short(span_file: Path, support_rules: Path,
                                                                          tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          cut_value: str, bound: int | None) -> None:
    """Cut inside a literal or a number (`nu` of null, `0.` of 0.5, `1e-` of 1e-05, `-` of -1), the report's end
    read as a bad value (`not JSON: Expecting value` or `Expecting ',' delimiter`), not as the end of a write that
    stopped."""
    from monitor.report import model

    whole = tmp_path / "whole.json"
    assert _run(span_file, support_rules, "--json", str(whole))[0] == 0
    text = whole.read_text().rstrip()
    assert text.endswith("}")
    cut = tmp_path / "cut.json"
    cut.write_text(f'{text[:-1].rstrip()}, "last": {cut_value}')  # a member whose value the write stopped in
    if bound is not None:
        monkeypatch.setattr(model, "MAX_BASELINE_BYTES", bound)
    code, out = _run(span_file, support_rules, "--baseline", str(cut))
    assert code == 2, out
    (line,) = [x for x in out.splitlines() if x.startswith("Error: ")]
    assert "ends before its JSON does: cut short" in line, out
