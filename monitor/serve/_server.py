"""The service: receiver and metrics endpoints, the worker, rule reloads and graceful shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import signal
import socket
import threading
from collections.abc import Callable, Coroutine
from types import FrameType
from typing import Any, TypeVar

from aiohttp import web

from monitor.metrics import LISTENER_METRICS, LISTENER_RECEIVER, ToolwatchMetrics, served_registry
from monitor.serve import _sighup
from monitor.serve._conn import METRICS_CONNECTIONS, REFUSAL, TEXT_REFUSAL, ConnectionCap, ensure_fd_limit
from monitor.serve._framing import answer_broken_heads, guard_body_framing
from monitor.serve._http import PROTOBUF, TracesHandler, metrics_app, receiver_app, refusal_status, text_head_answer
from monitor.serve._pipeline import Pipeline, VerdictHook
from monitor.serve._rules import Attempt, JudgeFactory, Rules, default_judge_factory
from monitor.serve._settings import GRPC, METRICS, RECEIVER, Settings
from monitor.serve._verdict_log import VerdictLog

T = TypeVar("T")

# A reload follows a SIGHUP at once, the next one no sooner than this after it: a storm of signals reloads twice,
# instead of once per signal (each load takes the CPU: about 40 ms for a rule file of 5 tools, seconds for thousands).
RELOAD_GAP_S = 1.0

logger = logging.getLogger(__name__)


def listen_error(exc: OSError, host: str, port: int, what: str, host_option: str, port_option: str) -> OSError:
    """Why `host:port` cannot be had for `what`, with a hint naming the option to change."""
    if isinstance(exc, socket.gaierror):
        hint = f"{host!r} is not an address: check {host_option}"
    elif exc.errno == errno.EADDRINUSE:
        hint = f"another process holds the port: choose another {port_option}"
    elif exc.errno == errno.EADDRNOTAVAIL:
        hint = f"{host} is not an address of this machine: check {host_option}"
    elif exc.errno == errno.EACCES:
        hint = f"ports below 1024 need privileges: choose another {port_option}"
    else:
        hint = f"check {host_option} and {port_option}"
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return OSError(f"cannot listen on {address} for {what}: {exc.strerror or exc} ({hint})")


def _bind(host: str, port: int, what: str, host_option: str, port_option: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise listen_error(exc, host, port, what, host_option, port_option) from None
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def url_host(host: str) -> str:
    """A listen address as a URL's host: an IPv6 address bracketed (RFC 3986), as it is written in a URL."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class Server:
    """One toolwatch monitor process. `await start()`, then `await stop()` (judges pending turns)."""

    def __init__(
        self,
        settings: Settings,
        *,
        judge_factory: JudgeFactory = default_judge_factory,
        metrics: ToolwatchMetrics | None = None,
        on_verdicts: VerdictHook | None = None,
    ) -> None:
        self.settings = settings
        self.rules = Rules(settings.rules, judge_factory=judge_factory)
        self.metrics = metrics or ToolwatchMetrics(windows=settings.windows)
        # The verdict log is opened by start(), once the ports are bound: a server that cannot start creates no file.
        self.pipeline = Pipeline(settings, self.rules, self.metrics, on_verdicts=on_verdicts)
        self.alerts: Any = None
        if settings.alerts and self.rules.current.ruleset.alerts:
            self.alerts = self._make_alerts()
        self.port = settings.port
        self.metrics_port = settings.metrics_port
        self._stop = asyncio.Event()
        self._runners: list[web.AppRunner] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._ready = False
        self._stopped = False
        self._grpc: Any = None
        self.grpc_port: int | None = None
        self._reload_wanted = False
        self._reloader: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._reload_lock = asyncio.Lock()
        self._loading: asyncio.Future[Attempt] | None = None  # the last load's outcome, set from its thread
        self._hangups_ignored = 0  # SIGHUPs while stopping

    def _make_alerts(self) -> Any:
        """The rule file's alerts evaluated in process (toolwatch_alert_active; optional webhook)."""
        from monitor.alerts.live import for_metrics

        with _sighup.blocked():  # its notifier's thread
            live = for_metrics(
                self.rules.current.ruleset,
                self.metrics,
                notify_url=self.settings.alert_webhook,
                interval_s=self.settings.alert_interval_s,
            )
        return live  # it follows the metrics: it counts what they count, its windows step with theirs

    @property
    def ready(self) -> bool:
        # Not ready while the queue is 90% full: a load balancer sends new work elsewhere.
        p = self.pipeline
        return self._ready and p.queued * 10 < p.capacity * 9 and p.queued_bytes * 10 < p.capacity_bytes * 9

    @property
    def endpoint(self) -> str:
        return f"http://{url_host(self.settings.host)}:{self.port}/v1/traces"

    @property
    def metrics_url(self) -> str:
        return f"http://{url_host(self.settings.metrics_host)}:{self.metrics_port}/metrics"

    @property
    def grpc_endpoint(self) -> str:
        """The OTLP/gRPC endpoint, `http://` included: without it the gRPC exporters take TLS, which it does not
        speak."""
        return f"http://{url_host(self.settings.host)}:{self.grpc_port}"

    async def start(self) -> None:
        """Bind every port, then open the verdict log and start serving; on failure nothing is left open."""
        with _sighup.blocked():  # in the threads started here (gRPC's, the alerts')
            await self._start()

    async def _start(self) -> None:
        s = self.settings
        s.validate()  # a ValueError, before anything is bound (two listeners on one port among them)
        socks: list[socket.socket] = []
        try:
            socks.append(_bind(s.host, s.port, *RECEIVER))
            socks.append(_bind(s.metrics_host, s.metrics_port, *METRICS))
            if s.grpc_port is not None:
                await self._start_grpc(s.grpc_port)
            if s.verdict_log:
                self.pipeline.verdict_log = self._open_verdict_log(s.verdict_log)
            handler = TracesHandler(s, self.pipeline, self.metrics)
            apps = [
                receiver_app(handler, s.max_body_bytes),
                metrics_app(served_registry(self.metrics), lambda: self.ready),
            ]
            grpc_connections = s.max_connections if s.grpc_port is not None else 0  # gRPC has a cap of its own
            ensure_fd_limit(s.max_connections + grpc_connections + METRICS_CONNECTIONS)
            limits = ((s.max_connections, LISTENER_RECEIVER), (METRICS_CONNECTIONS, LISTENER_METRICS))
            for app, sock, (limit, listener) in zip(apps, socks, limits, strict=True):
                # The receiver decompresses itself (bounded, streaming) and never reads an unwanted body to its
                # end: no automatic decompression, no lingering read of a refused request. A connection that has
                # not sent a whole request head within the read timeout (also between requests) is closed.
                runner = web.AppRunner(
                    app,
                    access_log=None,
                    handle_signals=False,
                    shutdown_timeout=5.0,
                    auto_decompress=False,
                    lingering_time=0,
                    keepalive_timeout=s.read_timeout_s,
                )
                await runner.setup()
                self._runners.append(runner)
                assert runner.server is not None
                receiver = listener == LISTENER_RECEIVER
                refused = (PROTOBUF, refusal_status(REFUSAL)) if receiver else TEXT_REFUSAL
                ConnectionCap(
                    runner.server, limit, s.retry_after_s, functools.partial(self._refused, listener), refused
                )
                if receiver:
                    guard_body_framing(runner.server)
                    answer_broken_heads(runner.server, handler.bad_head)
                else:  # a text listener: its broken heads answered in text, logged apart from the receiver's
                    answer_broken_heads(runner.server, text_head_answer(listener))
                await web.SockSite(runner, sock).start()
        except BaseException:
            await self._close_listeners(socks)
            raise
        self.port, self.metrics_port = (sock.getsockname()[1] for sock in socks)
        self._stop = asyncio.Event()
        self._tasks.append(asyncio.create_task(self.pipeline.run(self._stop)))
        if s.watch_rules:
            self._watcher = asyncio.create_task(self._watch_rules())
            self._tasks.append(self._watcher)
        if self.alerts is not None:
            self.alerts.start()
        self._ready = True
        logger.info("receiving OTLP/HTTP on %s; metrics on %s", self.endpoint, self.metrics_url)

    def _refused(self, listener: str) -> None:
        self.metrics.ops.connection_refused(listener)

    async def _start_grpc(self, port: int) -> None:
        from monitor.serve._grpc import GrpcReceiver

        host = self.settings.host
        if port:
            # gRPC says only "Failed to bind": a plain bind first tells why the port cannot be had.
            _bind(host, port, *GRPC).close()
        self._grpc = GrpcReceiver(self.settings, self.pipeline)
        self.grpc_port = await self._grpc.start(host, port)

    def _open_verdict_log(self, path: str) -> VerdictLog:
        s = self.settings
        try:
            return VerdictLog(
                path, all_turns=s.verdict_log_all, max_bytes=s.verdict_log_max_bytes, backups=s.verdict_log_backups,
                on_lost=self.pipeline.metrics.ops.verdict_log_lost,
            )
        except OSError as exc:
            raise OSError(f"cannot open the verdict log {path}: {exc.strerror or exc} (check --verdict-log)") from None

    async def _close_listeners(self, socks: list[socket.socket]) -> None:
        """Undo a failed start: close every socket, the gRPC server and the verdict log it opened."""
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
        for sock in socks:
            sock.close()
        if self._grpc is not None:
            await self._grpc.stop(0)
            self._grpc = None
        if self.pipeline.verdict_log is not None:
            self.pipeline.verdict_log.close()
            self.pipeline.verdict_log = None

    async def reload_rules(self) -> bool | None:
        """Load the rule files again: True when the new rules are in force, False when the old ones were kept, None
        when the server stopped meanwhile (nothing changed). The files are read, validated and compiled in a thread
        of their own, so the loop goes on receiving and answering scrapes (a file of 5,000 tools takes seconds);
        the outcome is put in force on the loop in one step. One reload at a time."""
        async with self._reload_lock:
            if self._stopped:
                return None
            attempt = await self._prepare()
            if self._stopped:  # a stop came while the files were read: they are not put in force
                return None
            return self._commit(attempt)

    async def _prepare(self) -> Attempt:
        """`Rules.prepare()` in a daemon thread: a load still running at stop holds neither stop nor the exit.
        A load abandoned by a cancelled reload is waited for before the next one starts."""
        if self._loading is not None and not self._loading.done():
            await asyncio.shield(self._loading)
        loop = asyncio.get_running_loop()
        loading: asyncio.Future[Attempt] = loop.create_future()

        def settle(attempt: Attempt) -> None:
            if not loading.done():
                loading.set_result(attempt)

        def load() -> None:
            try:
                attempt = self.rules.prepare()  # a failure to load is the attempt's error
            except BaseException as exc:  # noqa: BLE001 - a failure of its own too: the reload must end, and count
                attempt = self.rules.failed(exc)
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits for the outcome any more
                loop.call_soon_threadsafe(settle, attempt)

        self._loading = loading
        with _sighup.blocked():  # the load may outlive the loop's SIGHUP handler (see _sighup)
            threading.Thread(target=load, name="toolwatch-rules-load", daemon=True).start()
        return await asyncio.shield(loading)

    def _commit(self, attempt: Attempt) -> bool:
        """On the loop, between two steps of the worker (every turn is judged wholly by the old or by the new
        rules): the rules, the metrics' label sets and the alerts of a prepared reload."""
        ok = self.rules.commit(attempt)
        self.metrics.ops.reload(ok)
        if ok:
            self.pipeline.apply_labels()
            if self.alerts is not None:
                self.alerts.update(self.rules.current.ruleset)
            elif self.settings.alerts and self.rules.current.ruleset.alerts:
                self.alerts = self._make_alerts()
                with _sighup.blocked():
                    self.alerts.start()
        return ok

    def request_reload(self) -> None:
        """SIGHUP: reload the rules now, or once the last reload is RELOAD_GAP_S old; signals meanwhile coalesce
        into that one reload, which reads the files as they are after the last of them."""
        self._reload_wanted = True
        if self._reloader is None or self._reloader.done():
            self._reloader = asyncio.get_running_loop().create_task(self._reload_coalesced())

    async def _reload_coalesced(self) -> None:
        while self._reload_wanted and not self._stopped:
            self._reload_wanted = False
            await self.reload_rules()
            await asyncio.sleep(RELOAD_GAP_S)

    async def _watch_rules(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=self.settings.watch_interval_s)
            # While a reload (a SIGHUP's) is loading, the files are not compared with the rules it replaces.
            if not self._stop.is_set() and not self._reload_lock.locked() and self.rules.changed():
                await self.reload_rules()

    def request_stop(self) -> None:
        self._stop.set()

    async def wait_stopped(self) -> None:
        await self._stop.wait()

    async def stop(self) -> int:
        """Stop receiving, finish queued work, judge every pending turn; returns the turns judged at shutdown."""
        if self._stopped:
            return 0
        self._stopped = True
        self._ready = False
        # A reload still loading is left to its thread: stop waits for neither, and its rules are not put in force.
        for reloading in (self._reloader, self._watcher):
            if reloading is not None:
                reloading.cancel()
        # Stop accepting first (in-flight requests finish), then the worker; then judge what is pending.
        for runner in self._runners[:1]:
            await runner.cleanup()
        if self._grpc is not None:
            await self._grpc.stop()
        self._stop.set()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:  # a failed background task must not keep the pending turns from being judged
                logger.exception("background task %r failed", task)
        judged = self.pipeline.finish()
        for runner in self._runners[1:]:
            await runner.cleanup()
        if self.pipeline.verdict_log is not None:
            self.pipeline.verdict_log.close()
        if self.alerts is not None:
            self.alerts.close()
        logger.info("stopped; %d pending turns judged at shutdown", judged)
        return judged

    async def serve_forever(self, on_started: Callable[[Server], None] | None = None) -> int:
        """Run until SIGTERM or SIGINT; SIGHUP reloads the rules. Returns the turns judged at shutdown.

        From the start of the shutdown a SIGHUP is ignored (logged once), and it stays ignored once this returns:
        it never ends the process."""
        loop = asyncio.get_running_loop()
        await self.start()
        interrupt = signal.getsignal(signal.SIGINT)  # ignored (a script's background job): ignored again at shutdown
        # The handlers come before `on_started` (the ready line): a signal sent on seeing it is handled, not fatal.
        loop.add_signal_handler(signal.SIGHUP, self._on_sighup)
        # SIGTERM and SIGINT are not the loop's: asyncio learns of its signals from a byte each in its wake-up socket,
        # which a storm of SIGHUPs fills while the loop is busy (a big reload loading), and a stop's byte was then
        # dropped: the service went on serving. Python's own handlers are called on a flag per signal, never lost.
        def stop_signal(signum: int, frame: FrameType | None) -> None:
            loop.call_soon_threadsafe(self.request_stop)

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, stop_signal)
        # A storm of signals fills the loop's wake-up socket; by default every signal that finds it full then runs a
        # warning in the main thread wherever it is, which deadlocked the loop (both threads waiting on one lock, no
        # request answered again) after a few thousand SIGHUPs. The signals are the same without the warning.
        # (Every add_signal_handler turns the warning on again: none may follow.)
        signal.set_wakeup_fd(signal.set_wakeup_fd(-1), warn_on_full_buffer=False)
        try:
            if on_started is not None:
                on_started(self)
            await self._stop.wait()
        finally:
            # Shutdown: SIGTERM and SIGINT get their default actions back (another one ends the process at once),
            # SIGHUP does not: a reload sent now (a process manager's) would end the process while the pending turns
            # are judged and their verdicts written. Its handler drops it until stop() ends, then it is ignored.
            # (SIGINT's is not Python's default handler, whose KeyboardInterrupt surfaced wherever the loop was, a
            # traceback out of aiohttp's stop: its default action ends the process at once, as at start-up, unless
            # the process was started ignoring it.)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_IGN if interrupt is signal.SIG_IGN else signal.SIG_DFL)
            try:
                judged = await self.stop()
            finally:
                _sighup.ignore_from(loop)
        return judged

    def _on_sighup(self) -> None:
        """SIGHUP: reload the rules, unless the server is stopping (then logged once and dropped)."""
        if not self._stop.is_set():
            self.request_reload()
            return
        if not self._hangups_ignored:
            logger.warning("SIGHUP while stopping: ignored (the rules are not reloaded at shutdown)")
        self._hangups_ignored += 1


class ServerThread:
    """A Server on its own event loop in a background thread (for the demo, tests and benchmarks)."""

    def __init__(self, settings: Settings, **kwargs: object) -> None:
        self._settings = settings
        self._kwargs = kwargs
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="toolwatch-serve", daemon=True)
        self.server: Server | None = None

    def start(self) -> Server:
        self._thread.start()

        async def make() -> Server:
            server = Server(self._settings, **self._kwargs)  # type: ignore[arg-type]
            await server.start()
            return server

        try:
            self.server = asyncio.run_coroutine_threadsafe(make(), self._loop).result(timeout=30)
        except BaseException:
            self.stop()  # the loop and its thread end with the failed start
            raise
        return self.server

    def call(self, fn: Callable[[], object], timeout: float = 30.0) -> object:
        """Run `fn` on the server's loop (where its state lives) and return its result."""

        async def run() -> object:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=timeout)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run a coroutine on the server's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=timeout)

    def stop(self, timeout: float = 60.0) -> int:
        """Stop the server (judging pending turns) and the loop; returns the turns judged at shutdown. Idempotent."""
        if self._loop.is_closed():
            return 0
        judged = 0
        if self.server is not None:
            judged = asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(timeout=timeout)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=timeout)
        self._loop.close()
        return judged

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
