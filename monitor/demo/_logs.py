"""Incident-triage log lines: each starts with a subsystem tag; some mention another tag in the body."""

from __future__ import annotations

import random
from dataclasses import dataclass

TAGS = ("AUTH", "BILL", "FULF", "RISK", "SUPP")
TOOL_OF_TAG = {
    "AUTH": "pull_auth_telemetry",
    "BILL": "pull_billing_telemetry",
    "FULF": "pull_fulfillment_telemetry",
    "RISK": "pull_risk_telemetry",
    "SUPP": "pull_support_telemetry",
}

_EVENTS = {
    "AUTH": (
        "login failures spiking for region {region}",
        "MFA push timeouts for {n} users",
        "token refresh 401s from {svc}",
        "password reset emails delayed {n}s",
        "session store latency p99 {n}ms",
    ),
    "BILL": (
        "refunds stuck in pending for {n} orders",
        "invoice generation failing for plan {plan}",
        "card declines up {n}% on {svc}",
        "double charge reported on order {order}",
        "tax service timeouts",
    ),
    "FULF": (
        "parcel labels not printing at warehouse {region}",
        "{n} orders stuck in picking",
        "carrier API returning 503 for {svc}",
        "inventory sync lagging {n} minutes",
        "split shipment loop on {order}",
    ),
    "RISK": (
        "fraud score spike on {n} checkouts",
        "velocity rule blocking {plan} customers",
        "chargeback rate up {n}%",
        "device fingerprint service degraded",
        "manual review queue at {n}",
    ),
    "SUPP": (
        "ticket backlog over {n}",
        "chat widget failing to load in {region}",
        "SLA breaches on {plan} tier",
        "macro sending wrong template for {order}",
        "callback queue wait {n} minutes",
    ),
}
_ASIDES = (
    "possibly related to [{tag}] alerts earlier",
    "customer mentioned [{tag}] errors",
    "after [{tag}] deploy at 09:12",
    "[{tag}] team already paged",
)
_REGIONS = ("eu-west", "us-east", "ap-south", "sa-east")
_SERVICES = ("gateway", "checkout", "mobile-app", "partner-api")
_PLANS = ("pro", "team", "enterprise", "free")


@dataclass(frozen=True, slots=True)
class LogLine:
    tag: str  # the leading tag: the subsystem whose telemetry must be pulled
    text: str  # the whole line, starting with "[TAG] "
    mentions: tuple[str, ...] = ()  # other tags mentioned inside the body (distractors)

    @property
    def expected_tool(self) -> str:
        return TOOL_OF_TAG[self.tag]


class LogLineGenerator:
    """Reproducible log lines (`seed`); `distractor_rate` of them mention another subsystem's tag."""

    def __init__(self, seed: int = 0, *, distractor_rate: float = 0.3) -> None:
        self.rng = random.Random(seed)
        self.distractor_rate = distractor_rate

    def line(self) -> LogLine:
        rng = self.rng
        tag = rng.choice(TAGS)
        event = rng.choice(_EVENTS[tag]).format(
            region=rng.choice(_REGIONS),
            svc=rng.choice(_SERVICES),
            plan=rng.choice(_PLANS),
            n=rng.randint(2, 900),
            order=f"#{rng.randint(10000, 99999)}",
        )
        mentions: tuple[str, ...] = ()
        if rng.random() < self.distractor_rate:
            other = rng.choice([t for t in TAGS if t != tag])
            event = f"{event}; {rng.choice(_ASIDES).format(tag=other)}"
            mentions = (other,)
        return LogLine(tag, f"[{tag}] {event}", mentions)

    def lines(self, n: int) -> list[LogLine]:
        return [self.line() for _ in range(n)]
