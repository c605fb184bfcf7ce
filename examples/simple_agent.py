"""A tiny instrumented agent: `@tool`, `ToolExecutor` and `agent_turn`, spans printed to the console.

The "model" is a stand-in that routes by keyword and answers in the OpenAI chat-completions shape, so
the example runs offline. Swap `fake_model` for a real client call; nothing else changes.

    python examples/simple_agent.py                    # spans as JSON on stdout
    python examples/simple_agent.py --exporter otlp    # to OTEL_EXPORTER_OTLP_ENDPOINT (default localhost:4318)
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any, Literal

from instrumentation import ToolExecutor, agent_turn, configure, shutdown, tool


@tool
def get_weather(city: str, unit: Literal["c", "f"] = "c") -> dict[str, Any]:
    """Current weather for a city."""
    celsius = 8 + sum(map(ord, city)) % 20
    return {"city": city, "temperature": celsius if unit == "c" else round(celsius * 9 / 5 + 32), "unit": unit}


@tool
def convert_currency(amount: float, source: str, target: str) -> dict[str, Any]:
    """Convert an amount between two currencies."""
    rates = {"EUR": 1.0, "USD": 1.08, "GBP": 0.85}
    if source not in rates or target not in rates:
        raise ValueError(f"unsupported currency: {source if source not in rates else target}")
    return {"amount": round(amount / rates[source] * rates[target], 2), "currency": target}


def fake_model(question: str, call_number: int) -> list[dict[str, Any]]:
    """Tool calls a model might request for `question` (chat-completions shape)."""
    def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"id": f"call_{call_number}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)}}

    if match := re.search(r"weather in (\w+)", question, re.IGNORECASE):
        return [call("get_weather", {"city": match.group(1)})]
    if match := re.search(r"([\d.]+) (\w{3}) (?:in|to) (\w{3})", question):
        amount, source, target = match.groups()
        return [call("convert_currency", {"amount": float(amount), "source": source, "target": target})]
    if "stock" in question:
        return [call("get_stock_price", {"ticker": "ACME"})]  # a hallucinated tool: recorded as an error span
    return []


def run_turn(executor: ToolExecutor, question: str, number: int) -> str:
    with agent_turn(question, agent="simple-agent", conversation_id="demo", tools=executor) as turn:
        results = executor.execute_tool_calls(fake_model(question, number))
        answer = "; ".join(r.content for r in results) or "I can answer that without tools."
        turn.set_output(answer)
    return answer


def main() -> None:
    parser = argparse.ArgumentParser(description="A tiny agent whose tool calls are OpenTelemetry spans.")
    parser.add_argument("--exporter", choices=["console", "otlp"], default="console")
    parser.add_argument("--no-content", action="store_true", help="do not record tool arguments and results")
    options = parser.parse_args()
    configure(service_name="simple-agent", exporter=options.exporter, capture_content=not options.no_content)
    executor = ToolExecutor([get_weather, convert_currency], on_error="result")
    questions = ["What's the weather in Lisbon?", "Convert 120 EUR to USD", "What is the ACME stock price?",
                 "Say hello"]
    answers = [run_turn(executor, q, n) for n, q in enumerate(questions, 1)]
    shutdown()  # flush the spans before printing the answers
    for question, answer in zip(questions, answers, strict=True):
        print(f"Q: {question}\nA: {answer}")


if __name__ == "__main__":
    main()
