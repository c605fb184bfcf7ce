"""The HTML report in headless Chromium (DevTools protocol): no console error, no network request, and the
confusion-matrix cells hold the expected counts after the page's scripts ran."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from monitor.judge import Judge
from monitor.report import ReportBuilder, render_html
from tests.monitor.offline.test_report_text import ESCAPES_SHOWN, escapes_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium missing: run scripts/ensure-services.sh (as `make test` does)"
)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--remote-debugging-port=0"]


class Page:
    """A minimal DevTools protocol client over one page target."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            fut = self._pending.pop(data.get("id", -1), None)
            if fut is not None:
                fut.set_result(data)
            elif "method" in data:
                self.events.append(data)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[self.next_id] = fut
        await self.ws.send_json({"id": self.next_id, "method": method, "params": params})
        reply = await asyncio.wait_for(fut, 20)
        assert "error" not in reply, reply
        return dict(reply.get("result", {}))

    async def evaluate(self, expression: str) -> Any:
        res = await self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in res, res
        return res["result"].get("value")

    async def wait_event(self, method: str, timeout: float = 20) -> None:
        async def poll() -> None:
            while not any(e["method"] == method for e in self.events):
                await asyncio.sleep(0.02)

        await asyncio.wait_for(poll(), timeout)


@contextlib.asynccontextmanager
async def chromium_page(profile: Path) -> AsyncIterator[Page]:
    assert CHROMIUM is not None
    proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        port_file = profile / "DevToolsActivePort"
        for _ in range(1200):  # up to 60 s for a cold start on a loaded machine
            if port_file.exists() and len(port_file.read_text().splitlines()) >= 2:
                break
            await asyncio.sleep(0.05)
        port = int(port_file.read_text().splitlines()[0])
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/json/list") as resp:
                targets = await resp.json()
            url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
            async with http.ws_connect(url, max_msg_size=0) as ws:
                page = Page(ws)
                try:
                    yield page
                finally:
                    page._reader.cancel()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


async def test_html_report_renders_in_chromium(support_builder: ReportBuilder, tmp_path: Path) -> None:
    support_builder.record_point("random accuracy", 5, 0.4)
    report = support_builder.build("probe", "toolwatch report")
    html_path = tmp_path / "report.html"
    html_path.write_text(render_html(report), encoding="utf-8")
    async with chromium_page(tmp_path / "profile") as page:
        for domain in ("Runtime", "Log", "Page", "Network"):
            await page.send(f"{domain}.enable")
        await page.send("Page.navigate", url=html_path.as_uri())
        await page.wait_event("Page.loadEventFired")
        assert await page.evaluate("document.getElementById('js-status').dataset.ready") == "true"
        cells = await page.evaluate(
            "Array.from(document.querySelectorAll('#confusion td.cell'))"
            ".map(td => [td.dataset.expected, td.dataset.actual, td.textContent.trim()])")
        shown = {(e, a): int(n) for e, a, n in cells}
        rows, cols = report.confusion_labels()
        assert len(shown) == len(rows) * len(cols)
        assert shown == {(r, c): report.confusion_cell(r, c) for r in rows for c in cols}
        assert shown[("get_order_status", "get_order_status")] == 5
        assert shown[("get_order_status", "(unknown)")] == 1 and shown[("(none)", "get_order_history")] == 1
        # The row-percent toggle rewrites the cells from the same counts: 5 of the 8 expected calls.
        await page.evaluate("document.getElementById('confusion-toggle').click()")
        pct = await page.evaluate("document.querySelector('#confusion td[data-expected=\"get_order_status\"]"
                                  "[data-actual=\"get_order_status\"]').textContent")
        assert pct == "62.5%"
        await page.evaluate("(() => { const f = document.getElementById('worst-filter');"
                            " f.value = 'order 6'; f.dispatchEvent(new Event('input')); })()")
        visible = await page.evaluate("Array.from(document.querySelectorAll('#worst tbody tr'))"
                                      ".filter(tr => tr.style.display !== 'none').length")
        assert visible == 1
        assert await page.evaluate("document.querySelectorAll('#series-chart polyline').length") == 2
        assert await page.evaluate("document.getElementById('accuracy-line').textContent") == report.accuracy_line
        await asyncio.sleep(0.2)
    errors = [e for e in page.events if e["method"] == "Runtime.exceptionThrown"
              or (e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
              or (e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
    assert errors == []
    requests = [e["params"]["request"]["url"] for e in page.events if e["method"] == "Network.requestWillBeSent"]
    assert requests and all(u.startswith(("file:", "data:")) for u in requests), requests


async def test_html_report_with_control_characters_renders_them_as_escapes(support_judge: Judge,
                                                                          tmp_path: Path) -> None:
    """Control characters from the run (an ESC sequence in an input, a NUL in an agent's error) reach the page as
    the terminal shows them, `\\x1b` escapes: the page loads with no console error and shows them so."""
    report = escapes_report(support_judge)
    html_path = tmp_path / "report.html"
    html_path.write_text(render_html(report), encoding="utf-8")
    async with chromium_page(tmp_path / "profile") as page:
        for domain in ("Runtime", "Log", "Page"):
            await page.send(f"{domain}.enable")
        await page.send("Page.navigate", url=html_path.as_uri())
        await page.wait_event("Page.loadEventFired")
        assert await page.evaluate("document.getElementById('js-status').dataset.ready") == "true"
        text = await page.evaluate("document.body.innerText")
        await asyncio.sleep(0.2)
    assert not [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]
    for shown in ESCAPES_SHOWN:
        assert shown in text, shown
    errors = [e for e in page.events if e["method"] == "Runtime.exceptionThrown"
              or (e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
              or (e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
    assert errors == []
