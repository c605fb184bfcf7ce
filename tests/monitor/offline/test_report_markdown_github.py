"""The Markdown report as GitHub renders it (cmark-gfm, GitHub's own parser, with its extensions: tables,
strikethrough, autolinks, the tag filter, task lists): text from the run shows as written, no link made of it.

GitHub's autolink extension links a bare URL (`https://...`, `ftp://...`) and `www.` text with no markup at all, and
reads the link from the Markdown source, backslash escapes and entities included: an input holding
`https://x.y/q?a=1&b=2` showed as `https://x.y/q?a=1&amp;b=2`, `*www.a.com*` as `*www.a.com\\*`, each a link to that
garbled address.
"""

from __future__ import annotations

import html as htmllib
import re

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options
from hypothesis import given
from hypothesis import strategies as st

from monitor.report import Report, Table, render_markdown

URLS = [
    "see https://x.y/q?a=1&b=2 now",
    "https://x.y/a*b*c",
    "get https://x.y/$HOME~1#frag",
    "*www.a.com*",
    "_http://x.y_",
    "(www.example.com/help)",
    "ftp://x.y/[a](b)",
    "<https://a.b>",
    "HTTPS://X.Y/a|b",
    "WWW.x.com and www.x.com",
    "mailto:x@y.z is fine, https://evil.example/login is not",
]


def _github(markdown: str) -> str:
    """HTML as GitHub makes it of a comment or a job summary (raw HTML kept: GitHub filters it after, this shows it)."""
    return str(cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE))


def _report(text: str) -> Report:
    return Report("eval", text, "acc", {}, {}, [], [], [], [], tables=[Table("t", ["cell"], [[text]])], notes=[text])


def _shown(html: str) -> tuple[str, str, str]:
    """The title, the table cell and the note as a browser shows them."""
    def text(fragment: str) -> str:
        return htmllib.unescape(re.sub(r"<[^>]*>", "", fragment))

    (title,) = re.findall(r"<h1>(.*?)</h1>", html, re.S)
    table = re.findall(r"<tbody>(.*?)</tbody>", html, re.S)[-1]  # after the figures'
    (cell,) = re.findall(r"<td>(.*?)</td>", table, re.S)
    (note,) = re.findall(r"<li>(.*?)</li>", html, re.S)
    return text(title), text(cell), text(note)


def _links(html: str) -> list[str]:
    return re.findall(r"<a [^>]*>.*?</a>", html, re.S)


@pytest.mark.parametrize("text", URLS)
def test_a_url_in_the_text_is_no_link_on_github_and_shows_as_written(text: str) -> None:
    html = _github(render_markdown(_report(text)))
    assert [a for a in _links(html) if "mailto:" not in a] == [], html
    assert _shown(html) == (text, text, text), html


# Pieces of URLs and of the Markdown around them, and what the report escapes (no `@`: an e-mail address is linked).
_PIECES = ["https://x.y1", "http://", "ftp://a.b/c", "www.x.y1", "WWW.a.b", "www.", "x.y1", "/p", "?q=1", "-", "&",
           "amp;", "*", "_", "~", "(", ")", "<", ">", "|", "[", "]", "#", "$", "`", "\\", "!", ".", ":", " "]


@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=30).map(lambda p: " ".join("".join(p).split()))
       .filter(bool))
def test_any_url_like_text_is_no_link_on_github_and_shows_as_written(text: str) -> None:
    html = _github(render_markdown(_report(text)))
    assert _links(html) == [], html
    assert _shown(html) == (text, text, text), html


@pytest.mark.parametrize("text", ["bob@example.com at 12:30", "mailto:bob@example.com", "xmpp:bob@example.com/a.b"])
def test_an_e_mail_address_is_linked_on_github_to_itself_and_shows_as_written(text: str) -> None:
    """What the module says GitHub still links (only raw HTML could stop it): shown as written, linked to itself."""
    html = _github(render_markdown(_report(text)))
    assert _shown(html) == (text, text, text), html
    links = re.findall(r'<a href="([^"]*)">(.*?)</a>', html)
    assert len(links) == 3 and all(href in (shown, f"mailto:{shown}") for href, shown in links), links
