"""The composition root: the one place that turns settings into stores, services and front-ends.

``serve`` binds every service's port in the parent process, then runs uvicorn over those sockets
with one :class:`Gateway` per worker process; each worker opens the stores at its own start-up
(``build_gateway``'s ``start``), on its own event loop. Nothing else in the package picks an
engine or reads the settings table.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import logging
import os
import random
import secrets
import shutil
import signal
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess
from uvicorn.supervisors.multiprocess import Process

from tabulae.admission.faults import FaultInjector
from tabulae.admission.gate import Gate
from tabulae.admission.guard import GuardedService
from tabulae.admission.ledger import Ledger
from tabulae.admission.queue_guard import GuardedQueueService
from tabulae.admission.throttle import Targets, Throttle
from tabulae.blob.api import background_copy
from tabulae.blob.api.account_admin import ACCOUNT_ADMIN_PATH, AccountAdmin
from tabulae.blob.features import AccountFeatureBook
from tabulae.blob.feed import FeedPublisher
from tabulae.blob.rules import copies
from tabulae.blob.rules.tiers import TierPolicy
from tabulae.blob.service import BlobService
from tabulae.config import DEV_ACCOUNT, DEV_KEY, SETTINGS_ENV, Settings
from tabulae.console.app import build_console
from tabulae.console.blobs import BlobsPage
from tabulae.console.insight import InsightPage
from tabulae.console.pages import ConsolePage
from tabulae.console.queues import QueuesPage
from tabulae.console.render import CONSOLE_PATH
from tabulae.console.tables import TablesPage
from tabulae.dfs.app import DataLakeApp
from tabulae.dfs.service import DataLakeService
from tabulae.http.addressing import path_style_only
from tabulae.http.gateway import AsgiApp, Gateway, Mounts
from tabulae.http.heap import keep_freed_memory
from tabulae.http.listeners import open_reserved, per_worker, reserve
from tabulae.http.options import FrontendOptions
from tabulae.http.protocol import KEEP_ALIVE_SECONDS, AzureHttpProtocol
from tabulae.insight.containers import ContainerCounters
from tabulae.insight.exposition import escape_label_value
from tabulae.insight.partitions import Insight
from tabulae.insight.queues import QueueInsight
from tabulae.insight.server import ServerInsight
from tabulae.insight.tracing import RequestTracer, TimedStore, request_tracer
from tabulae.insight.volume import volume_prometheus
from tabulae.model.encryption import scope_pairs
from tabulae.model.errors import ServiceError
from tabulae.model.policies import CorsRule
from tabulae.model.roles import assignments
from tabulae.peers_dir import make_peers_dir
from tabulae.queue.api.app import QueueApp
from tabulae.queue.service import now_us
from tabulae.storage.blobs import GARBAGE_GRACE_SECONDS, BlobStore
from tabulae.storage.factory import VolumeSettings, open_stores
from tabulae.storage.queues import QueueStats, QueueStore
from tabulae.storage.stores import Stores
from tabulae.storage.tables import TableStore
from tabulae.storage.volume import CHECK_SECONDS, MIB, Volume
from tabulae.table.api.app import TableApp
from tabulae.table.api.index_admin import INDEX_ADMIN_PATH, IndexAdmin
from tabulae.table.api.metrics import MetricsEndpoint

PROMETHEUS_TYPE = b"text/plain; version=0.0.4; charset=utf-8"
GARBAGE_INTERVAL_SECONDS = 120.0  # how often each worker collects unreferenced blob content
FULL_GARBAGE_INTERVAL_SECONDS = 2.0  # and how often while the data volume is full
PURGE_INTERVAL_SECONDS = 60.0  # how often each worker purges soft-deleted blobs past retention
LOW_GARBAGE_INTERVAL_SECONDS = 4.0  # and while it is low on space (below --disk-warn)
# After the shutdown timeout: time for handlers to unwind, then for a worker to close its stores.
SHUTDOWN_MARGIN_SECONDS = 2.0
log = logging.getLogger("tabulae")


def frontend_options(
    settings: Settings, tracer: RequestTracer | None = None, volume: Volume | None = None
) -> FrontendOptions:
    return FrontendOptions(
        accounts=settings.accounts,
        max_body_bytes=settings.max_body_bytes,
        body_timeout=settings.body_timeout,
        oauth=settings.oauth,
        clock_skew=settings.clock_skew or None,
        access_log=settings.access_log,
        skip_version_check=settings.skip_api_version_check,
        default_cors=tuple(CorsRule(**rule) for rule in settings.cors_defaults),
        tracer=tracer,
        volume=volume,
        copy_from_remote=settings.copy_from_remote,
        encryption_scopes=scope_pairs(settings.encryption_scopes, settings.accounts),
        roles=assignments(settings.oauth_roles) or None,
    )


def throttle_for(settings: Settings, ledger: Ledger | None = None) -> Throttle | None:
    """One throttle per worker, shared by every service: the account's target covers them all.
    With a ledger the workers drain each other's buckets (the targets are the server's)."""
    if not settings.targets:
        return None
    targets = Targets(settings.partition_target, settings.account_target, queue_rate=settings.queue_target)
    return Throttle(targets, workers=settings.workers, ledger=ledger)


def faults_for(settings: Settings) -> FaultInjector | None:
    if settings.faults <= 0:
        return None
    seed = None if settings.faults_seed is None else settings.faults_seed + os.getpid()
    return FaultInjector(settings.faults, random.Random(seed))


def table_service(store: TableStore, settings: Settings, insight: Insight, gate: Gate) -> GuardedService:
    """The Table service behind the server's admission gate, with insight as configured."""
    return GuardedService(store, page_time_budget=settings.page_time_budget, insight=insight, gate=gate)


def queue_service(store: QueueStore, insight: QueueInsight, gate: Gate) -> GuardedQueueService:
    """The Queue service behind the server's admission gate, with insight as configured."""
    return GuardedQueueService(store, insight=insight, gate=gate)


class QueueFigures:
    """What ``/metrics`` shows of the queues: the store's figures (read at most every few seconds,
    as reading them visits every message) and the process's counters."""

    MAX_AGE = 5.0

    def __init__(self, service: GuardedQueueService, insight: QueueInsight) -> None:
        self._service = service
        self._insight = insight
        self._stats: list[QueueStats] = []
        self._read_at = -1e9

    async def stats(self) -> list[QueueStats]:
        if time.monotonic() - self._read_at > self.MAX_AGE:
            self._stats = await self._service.stats(self._insight.poison_threshold)
            self._read_at = time.monotonic()
        return self._stats


def console(
    settings: Settings,
    table: GuardedService | None,
    insight: ServerInsight,
    queues: GuardedQueueService | None,
    queue_insight: QueueInsight,
    blobs: BlobsPage | None = None,
    volume: Volume | None = None,
) -> AsgiApp:
    """The web console, with a page per service this server runs, over the same service objects
    as the front-ends (so the same admission control and counters apply)."""
    pages: list[ConsolePage] = []
    if table is not None:
        pages.append(TablesPage(table, insight_warnings(insight)))
    if queues is not None:
        pages.append(QueuesPage(queues, queue_insight))
    if blobs is not None:
        pages.append(blobs)
    pages.append(InsightPage(insight_snapshot(insight), volume.snapshot if volume is not None else None))
    prefill = None
    if settings.loopback() and settings.accounts.get(DEV_ACCOUNT) == [base64.b64decode(DEV_KEY)]:
        prefill = (DEV_ACCOUNT, DEV_KEY)  # the emulator's well-known key: public, and local only
    secret = settings.console_secret or secrets.token_bytes(32)
    hosts = list(settings.console_hosts)
    if settings.host not in ("0.0.0.0", "::", ""):
        hosts.append(settings.host)  # the address it listens on is a name the operator chose
    return build_console(
        pages,
        accounts=settings.accounts,
        secret=secret,
        max_body=settings.max_body_bytes,
        prefill=prefill,
        hosts=hosts,
        state_dir=settings.console_dir or None,
        volume=volume,
        body_timeout=settings.body_timeout,
    )


def on_one_port(port: int, app: AsgiApp, by_port: dict[int, AsgiApp]) -> AsgiApp:
    """``app`` for requests that arrived on ``port``; on another service's port the path is
    that service's to answer, as Azure answers a path it does not know."""

    async def dispatch(scope: dict[str, Any], receive: Any, send: Any) -> None:
        server = scope.get("server")
        other = by_port.get(server[1]) if server and server[1] != port else None
        await (other or app)(scope, receive, send)

    return dispatch


def build_gateway(settings: Settings) -> Gateway:
    """The ASGI app of one worker: its stores are opened when the worker starts."""

    async def start() -> Mounts:
        path_style_only(settings.path_style_only)
        stores = await open_stores(
            settings.store_url,
            settings.data_dir,
            settings.in_memory,
            volume_for(settings),
            hns=settings.hns_set(),
        )
        tracer = request_tracer() if settings.otel else None
        if tracer is not None:  # each store call's time counts towards its request's span
            stores.tables = TimedStore(stores.tables)  # type: ignore[assignment]
            stores.queues = TimedStore(stores.queues)  # type: ignore[assignment]
            stores.blobs = TimedStore(stores.blobs)  # type: ignore[assignment]
        insight = Insight(
            partition_target=settings.partition_target,
            account_target=settings.account_target,
            store=stores.kind,
        )
        queue_insight = QueueInsight(
            queue_target=settings.queue_target, poison_threshold=settings.poison_threshold
        )
        containers = ContainerCounters()
        peers_dir = Path(settings.peers_dir) if settings.peers_dir else None
        server = ServerInsight(
            insight,
            queue_insight,
            containers,
            peers_dir=peers_dir,
            frontend=settings.frontend,
            secret=settings.metrics_secret,
        )
        ledger = Ledger(peers_dir, settings.workers) if peers_dir is not None and settings.targets else None
        gate = Gate(throttle_for(settings, ledger), faults_for(settings))  # every service's and the console's
        options = frontend_options(settings, tracer, stores.volume)
        ports = settings.ports()
        by_port: dict[int, AsgiApp] = {}
        tasks: list[asyncio.Task[None]] = []
        figures: QueueFigures | None = None
        table: GuardedService | None = None
        queues: GuardedQueueService | None = None
        blobs: BlobsPage | None = None
        if "table" in ports:
            table = table_service(stores.tables, settings, insight, gate)
            by_port[ports["table"]] = TableApp(table, options)
        if "queue" in ports:
            queues = queue_service(stores.queues, queue_insight, gate)
            by_port[ports["queue"]] = QueueApp(queues, options)
            figures = QueueFigures(queues, queue_insight)
            tasks.append(asyncio.get_running_loop().create_task(queues.keep_collecting()))
        features: AccountFeatureBook | None = None
        blob_service: BlobService | None = None
        if "blob" in ports:
            blob_service = BlobService(
                stores.blobs,
                tiering=TierPolicy(settings.default_access_tier, settings.rehydrate_delay),
                features=settings.features_of,
                owner=copies.this_process(),
            )
            features = blob_service.features
            lake = DataLakeApp(
                blob_service, options, gate, containers, roles=assignments(settings.oauth_roles).blob
            )
            by_port[ports["blob"]] = lake
            tasks.append(asyncio.get_running_loop().create_task(sweep_paths(lake.dfs)))
            blobs = BlobsPage(blob_service, gate, containers)
            tasks.append(
                asyncio.get_running_loop().create_task(
                    collect_garbage(stores.blobs, stores.volume, settings.blob_garbage_grace)
                )
            )
            tasks.append(asyncio.get_running_loop().create_task(purge_deleted(blob_service)))
            # the change feed (blob/feed.py), which waits while the volume is full
            publisher = FeedPublisher(stores.blobs, time.time, paused=lambda: stores.volume.full)
            tasks.append(asyncio.get_running_loop().create_task(publisher.run()))
        tasks.append(asyncio.get_running_loop().create_task(watch_volume(stores)))
        extras: dict[str, AsgiApp] = {}
        if table is not None:
            extras[INDEX_ADMIN_PATH] = IndexAdmin(table, options)
        if features is not None:
            extras[ACCOUNT_ADMIN_PATH] = AccountAdmin(features, options, blob_service)
        if settings.console_on():
            # One port only (the Table port, else the first service's): one origin, one cookie.
            console_port = next(iter(ports.values()))
            app = console(settings, table, server, queues, queue_insight, blobs, stores.volume)
            extras[CONSOLE_PATH] = on_one_port(console_port, app, by_port)

        async def metrics(as_json: bool) -> tuple[bytes, bytes]:
            view = await server.view(hashed=settings.metrics_keys == "hashed")
            stats = server.queue_stats(await figures.stats(), view) if figures is not None else []
            frontend = {
                "frontend": settings.frontend,
                "workers": settings.workers,
                "reporting": view.workers,
                "processes": view.processes,
            }
            if as_json:
                snapshot = view.tables.snapshot()
                snapshot["containers"] = view.containers.snapshot()
                if figures is not None:
                    queue_snapshot = view.queues.snapshot(stats, now_us())
                    snapshot["queues"] = queue_snapshot["queues"]
                    snapshot["queue_target"] = queue_snapshot["queue_target"]
                    snapshot["warnings"].extend(queue_snapshot["warnings"])
                snapshot["frontend"] = frontend
                snapshot["volume"] = stores.volume.snapshot()
                return b"application/json", orjson.dumps(snapshot)
            text = view.tables.prometheus() + view.containers.prometheus()
            if figures is not None:
                text += view.queues.prometheus(stats, now_us())
            text += frontend_prometheus(frontend) + volume_prometheus(stores.volume.snapshot())
            return PROMETHEUS_TYPE, text.encode()

        endpoint = MetricsEndpoint(
            metrics,
            accounts=settings.accounts,
            open_access=settings.loopback(),
            token=settings.metrics_token,
            clock_skew=settings.clock_skew or None,
        )
        server.start()

        async def close() -> None:
            server.close()
            if ledger is not None:
                ledger.close()
            if blob_service is not None:
                await background_copy.interrupt_all(blob_service)
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await stores.close()
            if tracer is not None:
                tracer.shutdown()

        metrics_port = ports.get("table", next(iter(ports.values())))
        return Mounts(
            by_port, endpoint, close, extras=extras, metrics_port=metrics_port, volume=stores.volume
        )

    return Gateway(start)


def frontend_prometheus(frontend: dict[str, Any]) -> str:
    """Whose counts ``/metrics`` shows: one front-end (``host:pid``), with how many of its workers
    answered; several front-ends over one database each show their own."""
    label = f'frontend="{escape_label_value(frontend["frontend"])}"'
    return (
        "# HELP tabulae_frontend_workers Worker processes of this front-end whose counts are in the sums.\n"
        "# TYPE tabulae_frontend_workers gauge\n"
        f"tabulae_frontend_workers{{{label}}} {frontend['reporting']}\n"
        "# HELP tabulae_frontend_process_requests_total Requests counted by each worker process.\n"
        "# TYPE tabulae_frontend_process_requests_total counter\n"
        + "".join(
            f'tabulae_frontend_process_requests_total{{{label},pid="{p["pid"]}"}} {p["requests"]}\n'
            for p in frontend["processes"]
        )
    )


def insight_snapshot(server: ServerInsight) -> Any:
    """What the console's Insight page draws: the front-end's summed counters, keys as they are
    (the page shows the signed-in account's own data)."""

    async def snapshot() -> dict[str, Any]:
        return (await server.view()).tables.snapshot()

    return snapshot


def insight_warnings(server: ServerInsight) -> Any:
    """The warnings the console's table page shows: from the front-end's summed counters."""

    async def warnings() -> list[dict[str, Any]]:
        return (await server.view()).tables.warnings()

    return warnings


async def collect_garbage(store: BlobStore, volume: Volume, grace: float = GARBAGE_GRACE_SECONDS) -> None:
    """Collect unreferenced blob content now (a crash may have left some) and then every few
    minutes (as often as ``grace``, the seconds it stays readable, when shorter), in every
    worker; the store makes concurrent collections safe. While the volume is full or low, every
    few seconds: deleted content is what gives the room back."""
    interval = min(GARBAGE_INTERVAL_SECONDS, max(grace, FULL_GARBAGE_INTERVAL_SECONDS))
    while True:
        try:
            await store.collect_garbage(grace)
        except ServiceError as exc:  # the store said why (a full volume says so itself): retried
            log.debug("blob garbage collection failed: %s", exc.detail or exc.message)
        except Exception:  # never fatal: the next round tries again
            log.exception("blob garbage collection failed")
        waited = 0.0
        while waited < interval:
            await asyncio.sleep(FULL_GARBAGE_INTERVAL_SECONDS)
            waited += FULL_GARBAGE_INTERVAL_SECONDS
            if volume.full or (volume.low and waited >= LOW_GARBAGE_INTERVAL_SECONDS):
                break


def volume_for(settings: Settings) -> VolumeSettings:
    """How the store watches its volume: the reserve and the warning threshold of the settings,
    and the workers' shared directory (so that a change of state is logged once)."""
    shared = Path(settings.peers_dir) if settings.peers_dir else None
    return VolumeSettings(settings.disk_reserve * MIB, settings.disk_warn * MIB, shared)


async def watch_volume(stores: Stores) -> None:
    """Look at the data volume every second: its free space for /metrics and warnings, and the
    full state's way in (another worker released the reserve) and out (room came back); while
    full, the engine gives back what deletes freed."""
    volume = stores.volume
    while True:
        try:
            await asyncio.to_thread(volume.refresh)
            if volume.full or volume.tight:
                await stores.reclaim()
        except ServiceError as exc:  # no room even for that yet: tried again in a second
            log.debug("reclaiming space failed: %s", exc.detail or exc.message)
        except Exception:  # never fatal: looked at again in a second
            log.exception("watching the data volume failed")
        await asyncio.sleep(CHECK_SECONDS)


async def purge_deleted(service: BlobService) -> None:
    """Remove soft-deleted blobs, snapshots and versions whose retention ran out, every minute
    (``TABULAE_TEST_PURGE_SECONDS`` shortens that for tests), in every worker; their bytes then
    go with the garbage."""
    interval = float(os.environ.get("TABULAE_TEST_PURGE_SECONDS") or PURGE_INTERVAL_SECONDS)
    while True:
        try:
            await service.purge_deleted()
        except Exception:  # never fatal: the next round tries again
            log.exception("purge of soft-deleted blobs failed")
        await asyncio.sleep(interval)


async def sweep_paths(dfs: DataLakeService) -> None:
    """Delete expired files of HNS accounts and purge what deleted directories left when their
    retention ran out, every minute (``TABULAE_TEST_PURGE_SECONDS`` shortens that for tests),
    in every worker: each removal is decided again in its own transaction."""
    interval = float(os.environ.get("TABULAE_TEST_PURGE_SECONDS") or PURGE_INTERVAL_SECONDS)
    while True:
        await asyncio.sleep(interval)
        try:
            await dfs.sweep()
        except Exception:  # never fatal: the next round tries again
            log.exception("sweep of expired and deleted paths failed")


def create_app() -> Gateway:
    """Factory used by worker processes of ``tabulae serve --workers N``."""
    settings = Settings.from_json(os.environ[SETTINGS_ENV])
    configure_protocol(settings)  # this worker's own copy of the class
    keep_freed_memory()
    return build_gateway(settings)


def configure_protocol(settings: Settings) -> None:
    """The connection rules of :class:`AzureHttpProtocol`, which uvicorn builds without arguments."""
    AzureHttpProtocol.header_timeout = settings.body_timeout
    AzureHttpProtocol.max_per_client = settings.max_connections_per_client
    AzureHttpProtocol.shutdown_timeout = settings.shutdown_timeout


class BindError(Exception):
    """A service's port could not be listened on; the message says which and why, ``code`` what
    kind of refusal it was."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class StartupFailed(Exception):
    """A worker could not start (its own log line said why); the server has stopped."""


_BIND_CODES = {
    errno.EADDRINUSE: "AddressInUse",
    errno.EACCES: "PermissionDenied",
    errno.EADDRNOTAVAIL: "AddressNotAvailable",
}


def bind(settings: Settings) -> list[list[socket.socket]]:
    """Listen on every service's port before anything is announced, so a busy port is the first
    and only thing a user sees. One list of sockets (one per port) per worker: with several
    workers each listens on sockets of its own (:mod:`tabulae.http.listeners` says why)."""
    by_port: list[list[socket.socket]] = []
    try:
        for service, port in settings.ports().items():
            host = settings.host_of(service)
            try:
                by_port.append(reserve(host, port, settings.workers))
            except OSError as exc:
                flag = {"table": "--port", "queue": "--queue-port", "blob": "--blob-port"}[service]
                raise BindError(
                    f"cannot listen on {host}:{port} for the {service.capitalize()} service: "
                    f"{exc.strerror or exc} (choose another with {flag}, or leave it out with --services)",
                    _BIND_CODES.get(exc.errno or 0, "CannotListen"),
                ) from None
        by_port = open_reserved(by_port, settings.workers)
    except BaseException:
        for sockets in by_port:
            for sock in sockets:
                sock.close()
        raise
    return per_worker(by_port)


class _SpreadMultiprocess(Multiprocess):
    """uvicorn's supervisor, starting each worker on its own listening sockets. A worker started
    later in place of one that died (or on SIGHUP) gets every worker's sockets, as uvicorn gives
    them: it serves its predecessor's share and competes for the others', which is correct,
    only less evenly spread.

    A worker that fails to start (uvicorn's status for it) stops the server, as uvicorn does;
    ``failed`` then says so, for the server to exit non-zero instead of 0 as after a signal."""

    def __init__(
        self, config: uvicorn.Config, worker_sockets: list[list[socket.socket]], stop_within: float
    ) -> None:
        super().__init__(config, sockets=[sock for own in worker_sockets for sock in own])
        self._worker_sockets = worker_sockets
        self._stop_within = stop_within
        self.failed = False

    def init_processes(self) -> None:
        for own in self._worker_sockets:
            process = Process(self.config, own)
            process.start()
            self.processes.append(process)

    def join_all(self) -> None:
        """Wait for the workers told to stop, each bounded by its own shutdown (uvicorn's waits for
        ever): a worker still running after ``stop_within`` seconds is killed, so the server
        exits well before a container runtime's kill."""
        deadline = time.monotonic() + self._stop_within
        for process in self.processes:
            process.process.join(max(0.0, deadline - time.monotonic()))
            if process.process.is_alive():
                log.error("worker process %s did not stop in time; killing it", process.pid)
                process.kill()
                process.process.join()

    def keep_subprocess_alive(self) -> None:
        stopping = self.should_exit.is_set()
        super().keep_subprocess_alive()
        if not stopping and any(process.exitcode == STARTUP_FAILURE for process in self.processes):
            self.failed = True
            self.should_exit.set()


def serve(settings: Settings, worker_sockets: list[list[socket.socket]]) -> None:
    """Run uvicorn over the sockets from :func:`bind` until SIGTERM or SIGINT."""
    made = None
    if settings.console_on():
        if not settings.console_secret:
            settings.console_secret = secrets.token_bytes(32)  # one for every worker: any may answer
        if not settings.console_dir:
            made = settings.console_dir = tempfile.mkdtemp(prefix="tabulae-console-")
    if not settings.metrics_secret:
        settings.metrics_secret = secrets.token_bytes(32)  # one hash of a key in every worker
    settings.frontend = f"{socket.gethostname()}:{os.getpid()}"
    try:
        _serve(settings, worker_sockets)
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


def _serve(settings: Settings, worker_sockets: list[list[socket.socket]]) -> None:
    configure_protocol(settings)
    keep_freed_memory()  # the single worker's, or the parent's before it starts its workers
    options: dict[str, Any] = {
        "loop": "uvloop",
        "http": AzureHttpProtocol,
        "lifespan": "on",
        "access_log": False,
        "log_level": settings.log_level,
        "server_header": False,
        "date_header": False,
        # No X-Forwarded-For rewriting: the client address feeds SAS IP checks (sip), so a local
        # client must not be able to choose it; and it is one middleware less per request.
        "proxy_headers": False,
        # Our protocol cuts requests still in flight at shutdown_timeout; uvicorn cancels the
        # tasks that have still not ended (a handler stuck in a store call) a little later.
        "timeout_graceful_shutdown": settings.shutdown_timeout + SHUTDOWN_MARGIN_SECONDS,
        "timeout_keep_alive": KEEP_ALIVE_SECONDS,
        "ssl_certfile": str(settings.cert_file) if settings.cert_file else None,
        "ssl_keyfile": str(settings.key_file) if settings.key_file else None,
    }
    if settings.workers == 1:
        server = uvicorn.Server(uvicorn.Config(build_gateway(settings), **options))

        def stop(signum: int, frame: object) -> None:
            # Until uvicorn installs its own handlers (and again after it restores these and
            # raises the signal it drained on), a SIGTERM or SIGINT asks the server to stop: it
            # must never raise into the middle of the event loop's start-up.
            server.should_exit = True

        _on_stop_signals(stop)
        server.should_exit = _stop_asked
        try:
            server.run(sockets=worker_sockets[0])
        except SystemExit as exc:
            if exc.code != STARTUP_FAILURE:
                raise
            raise StartupFailed("the server could not start (the reason is logged above)") from None
        if not server.started and not server.should_exit:
            raise StartupFailed("the server could not start (the reason is logged above)")
        return

    settings.peers_dir = make_peers_dir()
    try:
        os.environ[SETTINGS_ENV] = settings.to_json()
        config = uvicorn.Config(
            "tabulae.compose:create_app", factory=True, workers=settings.workers, **options
        )
        stop_within = settings.shutdown_timeout + 2 * SHUTDOWN_MARGIN_SECONDS
        supervisor = _SpreadMultiprocess(config, worker_sockets, stop_within)
        if _stop_asked:
            supervisor.should_exit.set()
        supervisor.run()
    finally:
        shutil.rmtree(settings.peers_dir, ignore_errors=True)
    if supervisor.failed or any(process.exitcode == STARTUP_FAILURE for process in supervisor.processes):
        raise StartupFailed("a worker could not start (the reason is logged above); the server stopped")


def exit_on_stop_signals() -> None:
    """From the moment the ports are bound until a server takes the signals over, SIGTERM and
    SIGINT end the process cleanly (status 0) rather than by the default action (killed)."""
    _on_stop_signals(_exit_now)


_stop_asked = False  # a stop signal came before a server took the signals over


def _exit_now(signum: int, frame: object) -> None:
    # Nothing is running yet: plain Python code, safe to unwind. But a signal handler's exception
    # lands wherever the interpreter is, and some places swallow it (a weakref callback, a
    # __del__): the flag survives that, and the server that takes over stops at once.
    global _stop_asked
    _stop_asked = True
    raise SystemExit(0)


def _on_stop_signals(handler: Any) -> None:
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handler)
