"""Incident-triage log lines: a subsystem tag first, then a body with regions, error phrases, queue metrics
and, now and then, other subsystems' tags; lengths vary from a few words to long multi-clause lines.

`generate(rng)` is the probe generator (`toolwatch probe --generator examples.triage.generator:generate`).
"""

from __future__ import annotations

import random

TAGS = ("AUTH", "BILL", "FULF", "RISK", "SUPP")
TAG_WEIGHTS = (0.28, 0.24, 0.2, 0.16, 0.12)
REGIONS = ("us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1", "ap-northeast-1")
ERRORS = {
    "AUTH": ("token refresh failed", "login rate limited", "mfa challenge timed out", "session store unreachable"),
    "BILL": ("card declined", "invoice render failed", "ledger write conflict", "refund stuck in pending"),
    "FULF": ("pick list empty", "carrier api 502", "label print failed", "warehouse sync lagging"),
    "RISK": ("score model timeout", "velocity check tripped", "chargeback spike", "manual review backlog"),
    "SUPP": ("ticket import failed", "macro render error", "sla breach imminent", "chat widget offline"),
}
SERVICES = {
    "AUTH": ("authd", "oauth-gw", "session-svc"),
    "BILL": ("billing-api", "ledger", "invoicer"),
    "FULF": ("wms", "shipping-gw", "picker"),
    "RISK": ("riskd", "fraud-score", "review-q"),
    "SUPP": ("helpdesk", "chat-gw", "ticketd"),
}
LEVELS = ("ERROR", "WARN", "ERROR", "CRIT")


def _queue(rng: random.Random) -> str:
    depth = int(rng.paretovariate(1.6) * 40)
    return f"queue={rng.choice(('events', 'jobs', 'retries', 'webhooks'))} depth={depth} lag_ms={rng.randint(1, 900)}"


def _clause(rng: random.Random, tag: str) -> str:
    kind = rng.random()
    if kind < 0.3:
        return f"region={rng.choice(REGIONS)}"
    if kind < 0.55:
        return _queue(rng)
    if kind < 0.75:
        return f"req_id={rng.getrandbits(40):010x}"
    if kind < 0.9:
        return f"{rng.choice(SERVICES[tag])} retry {rng.randint(1, 5)}/5"
    return f"p99_ms={rng.randint(20, 4000)}"


def generate(rng: random.Random) -> str:
    """One log line. Most are short and ordinary; a few are long, mention other subsystems, or say SEV1."""
    tag = rng.choices(TAGS, TAG_WEIGHTS)[0]
    parts = [f"[{tag}]", rng.choice(LEVELS), rng.choice(SERVICES[tag]) + ":", rng.choice(ERRORS[tag])]
    for _ in range(min(int(rng.expovariate(0.8)), 12)):
        parts.append(_clause(rng, tag))
    if rng.random() < 0.06:
        other = rng.choice([t for t in TAGS if t != tag])
        parts.append(f"(see [{other}] {rng.choice(ERRORS[other])})")
    if rng.random() < 0.02:
        parts.insert(2, "SEV1")
    if rng.random() < 0.03:
        parts.append('msg="' + rng.choice(ERRORS[tag]) + '"')
    return " ".join(parts)
