"""The composition root: the one place that turns settings into stores, services and front-ends.

``serve`` binds every service's port in the parent process, then runs uvicorn over those sockets
with one :class:`Gateway` per worker process; each worker opens the stores at its own start-up
(``build_gateway``'s ``start``), on its own event loop. Nothing else in the package picks an
engine or reads the settings table.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
import socket
from typing import Any

import orjson
import uvicorn
from uvicorn.supervisors import Multiprocess

from tabulae.admission.blobs import BlobAdmission
from tabulae.admission.faults import FaultInjector
from tabulae.admission.guard import GuardedService
from tabulae.admission.throttle import Targets, Throttle
from tabulae.blob.api.app import BlobApp
from tabulae.blob.service import BlobService
from tabulae.config import SETTINGS_ENV, Settings
from tabulae.http.gateway import AsgiApp, Gateway, Mounts
from tabulae.http.options import FrontendOptions
from tabulae.http.protocol import AzureHttpProtocol
from tabulae.insight.containers import ContainerCounters
from tabulae.insight.partitions import Insight
from tabulae.storage.blobs import BlobStore
from tabulae.storage.factory import open_stores
from tabulae.storage.tables import TableStore
from tabulae.table.api.app import TableApp

PROMETHEUS_TYPE = b"text/plain; version=0.0.4; charset=utf-8"
GARBAGE_INTERVAL_SECONDS = 120.0
log = logging.getLogger("tabulae")


def frontend_options(settings: Settings) -> FrontendOptions:
    return FrontendOptions(
        accounts=settings.accounts,
        max_body_bytes=settings.max_body_bytes,
        body_timeout=settings.body_timeout,
        oauth=settings.oauth,
        access_log=settings.access_log,
    )


def admission_parts(settings: Settings) -> tuple[Throttle | None, FaultInjector | None]:
    """This worker's throttle (a share of each target) and fault injector, as configured; one of
    each per process, shared by every service, as Azure's account target is."""
    throttle = None
    if settings.targets:
        targets = Targets(settings.partition_target, settings.account_target)
        throttle = Throttle(targets, workers=settings.workers)
    faults = None
    if settings.faults > 0:
        seed = None if settings.faults_seed is None else settings.faults_seed + os.getpid()
        faults = FaultInjector(settings.faults, random.Random(seed))
    return throttle, faults


def table_service(
    store: TableStore,
    settings: Settings,
    insight: Insight,
    throttle: Throttle | None = None,
    faults: FaultInjector | None = None,
) -> GuardedService:
    """The Table service with targets, faults and insight."""
    return GuardedService(
        store, page_time_budget=settings.page_time_budget, insight=insight, throttle=throttle, faults=faults
    )


def build_gateway(settings: Settings) -> Gateway:
    """The ASGI app of one worker: its stores are opened when the worker starts."""

    async def start() -> Mounts:
        stores = await open_stores(settings.store_url, settings.data_dir, settings.in_memory)
        insight = Insight(partition_target=settings.partition_target, account_target=settings.account_target)
        containers = ContainerCounters()
        throttle, faults = admission_parts(settings)
        options = frontend_options(settings)
        ports = settings.ports()
        by_port: dict[int, AsgiApp] = {}
        if "table" in ports:
            service = table_service(stores.tables, settings, insight, throttle, faults)
            by_port[ports["table"]] = TableApp(service, options)
        collector: asyncio.Task[None] | None = None
        if "blob" in ports:
            admission = BlobAdmission(containers, throttle, faults)
            by_port[ports["blob"]] = BlobApp(BlobService(stores.blobs), options, admission)
            collector = asyncio.get_running_loop().create_task(collect_garbage(stores.blobs))

        def metrics(as_json: bool) -> tuple[bytes, bytes]:
            if as_json:
                return b"application/json", orjson.dumps(
                    {**insight.snapshot(), "containers": containers.snapshot()}
                )
            return PROMETHEUS_TYPE, (insight.prometheus() + containers.prometheus()).encode()

        async def close() -> None:
            if collector is not None:
                collector.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await collector
            await stores.close()

        return Mounts(by_port, metrics, close)

    return Gateway(start)


async def collect_garbage(store: BlobStore) -> None:
    """Collect unreferenced blob content now (a crash may have left some) and then every few
    minutes, in every worker; the store makes concurrent collections safe."""
    while True:
        try:
            await store.collect_garbage()
        except Exception:  # never fatal: the next round tries again
            log.exception("blob garbage collection failed")
        await asyncio.sleep(GARBAGE_INTERVAL_SECONDS)


def create_app() -> Gateway:
    """Factory used by worker processes of ``tabulae serve --workers N``."""
    settings = Settings.from_json(os.environ[SETTINGS_ENV])
    AzureHttpProtocol.header_timeout = settings.body_timeout  # this worker's own copy of the class
    return build_gateway(settings)


class BindError(Exception):
    """A service's port could not be listened on; the message says which and why."""


def bind(settings: Settings) -> list[socket.socket]:
    """Listen on every service's port before anything is announced, so a busy port is the first
    and only thing a user sees."""
    sockets: list[socket.socket] = []
    try:
        for service, port in settings.ports().items():
            try:
                sockets.append(_listen(settings.host, port))
            except OSError as exc:
                flag = {"table": "--port", "queue": "--queue-port", "blob": "--blob-port"}[service]
                raise BindError(
                    f"cannot listen on {settings.host}:{port} for the {service.capitalize()} service: "
                    f"{exc.strerror or exc} (choose another with {flag}, or leave it out with --services)"
                ) from None
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket as uvicorn makes one (address reuse, inheritable by worker processes)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def serve(settings: Settings, sockets: list[socket.socket]) -> None:
    """Run uvicorn over ``sockets`` (from :func:`bind`) until SIGTERM or SIGINT."""
    AzureHttpProtocol.header_timeout = settings.body_timeout
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
        "timeout_graceful_shutdown": 10,
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
        server.run(sockets=sockets)
        if not server.started and not server.should_exit:
            raise SystemExit(3)  # start-up failed (uvicorn's own exit status for it); logged already
        return

    def exit_now(signum: int, frame: object) -> None:
        raise SystemExit(0)  # before the supervisor takes the signals over: nothing is running yet

    _on_stop_signals(exit_now)
    os.environ[SETTINGS_ENV] = settings.to_json()
    config = uvicorn.Config("tabulae.compose:create_app", factory=True, workers=settings.workers, **options)
    Multiprocess(config, sockets=sockets).run()


def _on_stop_signals(handler: Any) -> None:
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handler)
