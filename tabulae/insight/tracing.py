"""OpenTelemetry: one span per request, with the time it spent waiting for the store.

Off unless ``tabulae serve --otel`` (and the ``tabulae[otel]`` extra) is there, and then the only
per-request cost is a context variable and one span. The span is made when the answer has gone
out, from times taken as the request came in (``start_span(start_time=…)``): nothing is open while
the request runs. Its attributes say which service and operation (the REST reference's name),
which account, the method and status, and ``tabulae.storage.ms``: the time the request's
coroutines spent awaiting store calls (a store wrapped in :class:`TimedStore`; the pieces of a
streamed blob download, read after the handler returned, are not in it).

Where spans go follows OpenTelemetry's own variable, ``OTEL_TRACES_EXPORTER``: ``otlp`` (the
default; needs ``opentelemetry-exporter-otlp``, configured by the ``OTEL_EXPORTER_OTLP_*``
variables) or ``console`` (JSON on stdout, one span at a time). ``OTEL_SERVICE_NAME`` names the
service (default ``tabulae``).
"""

from __future__ import annotations

import functools
import inspect
import os
import time
from contextvars import ContextVar
from typing import Any

# Seconds spent awaiting the store by the current request (a one-element list, so the store proxy
# adds to the request's own accumulator from whichever coroutine of the request awaits it).
STORAGE_SECONDS: ContextVar[list[float] | None] = ContextVar("tabulae_storage_seconds", default=None)


class TracingUnavailable(RuntimeError):
    """``--otel`` without the packages it needs; the message says what to install."""


class RequestTracer:
    """Makes the spans of one worker process."""

    def __init__(self, tracer: Any, kind: Any, provider: Any) -> None:
        self._tracer = tracer
        self._kind = kind
        self._provider = provider

    def record(
        self,
        *,
        service: str,
        operation: str,
        account: str | None,
        method: str,
        status: int,
        start_ns: int,
        end_ns: int,
        storage_seconds: float,
    ) -> None:
        name = f"{service.capitalize()} {operation or method}"
        span = self._tracer.start_span(name, kind=self._kind, start_time=start_ns)
        span.set_attribute("tabulae.service", service)
        span.set_attribute("tabulae.operation", operation)
        if account is not None:
            span.set_attribute("tabulae.account", account)
        span.set_attribute("http.request.method", method)
        span.set_attribute("http.response.status_code", status)
        span.set_attribute("tabulae.storage.ms", round(storage_seconds * 1000, 3))
        if status >= 500:
            span.set_status(self._error_status())
        span.end(end_time=end_ns)

    def _error_status(self) -> Any:
        from opentelemetry.trace import Status, StatusCode

        return Status(StatusCode.ERROR)

    def shutdown(self) -> None:
        self._provider.shutdown()


def request_tracer() -> RequestTracer:
    """The tracer of this process, exporting as ``OTEL_TRACES_EXPORTER`` says."""
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
        )
        from opentelemetry.trace import SpanKind
    except ImportError:
        raise TracingUnavailable("--otel needs OpenTelemetry: pip install 'tabulae[otel]'") from None
    provider = TracerProvider(
        resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "tabulae")})
    )
    exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    if exporter_name == "console":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    elif exporter_name == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise TracingUnavailable(
                "OTEL_TRACES_EXPORTER=otlp needs pip install opentelemetry-exporter-otlp-proto-http "
                "(or set OTEL_TRACES_EXPORTER=console)"
            ) from None
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    elif exporter_name != "none":
        raise TracingUnavailable(f"OTEL_TRACES_EXPORTER={exporter_name!r}: expected otlp, console or none")
    return RequestTracer(provider.get_tracer("tabulae"), SpanKind.SERVER, provider)


class TimedStore:
    """A store whose coroutine methods add their awaited time to the current request's
    :data:`STORAGE_SECONDS`; everything else is the store's own."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if not inspect.iscoroutinefunction(value):
            return value

        @functools.wraps(value)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            spent = STORAGE_SECONDS.get()
            if spent is None:
                return await value(*args, **kwargs)
            began = time.perf_counter()
            try:
                return await value(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - began

        setattr(self, name, timed)  # made once per method
        return timed
