"""The documents name files a reader can open: every relative Markdown link of README.md and rules/README.md, and
every bare mention of METRICS.md, resolve to a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "rules" / "README.md"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    links = [t for t in targets if "://" not in t and not t.startswith("mailto:")]
    missing = [t for t in links if not (doc.parent / t).exists()]
    assert not missing, missing


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_metrics_md_is_in_the_repository_where_the_docs_say(doc: Path) -> None:
    """The docs and the terminal report ("Figures (METRICS.md)") send readers to METRICS.md: it is rules/METRICS.md."""
    assert "METRICS.md" in doc.read_text(encoding="utf-8")
    spec = ROOT / "rules" / "METRICS.md"
    assert spec.is_file() and "## Aggregates" in spec.read_text(encoding="utf-8")
