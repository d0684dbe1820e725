"""What every pattern example needs: SDK clients that are metered, the server's counters, claims.

An example is a function taking an :class:`Example`. It creates what it needs through the
example (so that it is deleted afterwards, whatever happens), runs its operations inside
``ex.operation("what it does")`` blocks, and states what it shows with ``ex.claim``. The meter
sees every HTTP attempt the SDKs make (retries included, since the hook sits after the SDKs'
retry policies), and reads the two headers Tabulae adds to every query answer:
``x-tabulae-query-class`` and ``x-tabulae-scanned``. The server's own counters and warnings come
from ``GET /metrics?format=json`` at the root of the Table endpoint.

Nothing here knows about the server's code: examples are clients, and the same ones would run
against any endpoint that answers like Tabulae.
"""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.core.pipeline import PipelineResponse
from azure.data.tables import TableClient, TableServiceClient
from azure.storage.blob import BlobServiceClient, ContainerClient
from azure.storage.queue import QueueClient

from tabulae.tools.top import metrics_headers

__all__ = ["ClaimFailed", "Example", "Meter", "Operation", "SkipExample", "error_code"]


class ClaimFailed(AssertionError):
    """A claim of an example did not hold: the example fails with this message."""


class SkipExample(Exception):
    """The server lacks what an example needs (a flag it was not started with): say so, skip."""


@dataclass
class Operation:
    """One step of an example and what it cost: every HTTP attempt made inside it."""

    name: str
    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    classes: Counter[str] = field(default_factory=Counter)
    scanned: int = 0
    returned: int = 0
    queries: int = 0

    @property
    def failures(self) -> int:
        """Attempts answered 5xx (throttled, injected faults, timeouts)."""
        return sum(count for status, count in self.statuses.items() if status >= 500)

    @property
    def throttled(self) -> int:
        return self.statuses.get(503, 0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "requests": self.requests,
            "classes": dict(self.classes),
            "scanned": self.scanned if self.queries else None,
            "returned": self.returned if self.queries else None,
            "failures": self.failures,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
        }


class Meter:
    """Counts the SDKs' HTTP attempts into the operation under way (``raw_response_hook``)."""

    def __init__(self) -> None:
        self.operations: list[Operation] = []
        self._current: Operation | None = None
        self.last: Operation | None = None

    @contextlib.contextmanager
    def operation(self, name: str) -> Iterator[Operation]:
        op = Operation(name)
        self.operations.append(op)
        outer, self._current = self._current, op
        try:
            yield op
        finally:
            self._current = outer
            self.last = op

    def hook(self, response: PipelineResponse[Any, Any]) -> None:
        """Called by the SDK for every answer it receives, before deciding whether to retry."""
        op = self._current
        if op is None:
            return
        http = response.http_response
        op.requests += 1
        op.statuses[http.status_code] += 1
        query_class = http.headers.get("x-tabulae-query-class")
        if query_class is None:
            return
        op.queries += 1
        op.classes[query_class] += 1
        with contextlib.suppress(ValueError):
            op.scanned += int(http.headers.get("x-tabulae-scanned", "0"))
        op.returned += _returned(http)


def _returned(http: Any) -> int:
    """Entities (or table names) an answer with a query class delivered: a page's ``value``
    list, or the one entity of a point read."""
    if http.status_code != 200:
        return 0
    try:
        body = json.loads(http.body())
    except (ValueError, TypeError):
        return 0
    if isinstance(body, dict) and isinstance(body.get("value"), list):
        return len(body["value"])
    return 1 if isinstance(body, dict) else 0


class Insight:
    """The server's counters: ``GET /metrics?format=json`` at the root of the Table endpoint,
    signed with the account key of the connection string (a server off loopback requires it).
    The counters are the whole server's, whichever of its workers answers."""

    def __init__(self, table_url: str, connection_string: str) -> None:
        parts = urlsplit(table_url)
        self.url = f"{parts.scheme}://{parts.netloc}/metrics?format=json"
        self._connection_string = connection_string

    def snapshot(self) -> dict[str, Any]:
        headers = metrics_headers(self.url, connection_string=self._connection_string)
        try:
            request = urllib.request.Request(self.url, headers=headers)
            with urllib.request.urlopen(request, timeout=10) as answer:
                data: dict[str, Any] = json.loads(answer.read())
                return data
        except (urllib.error.URLError, ValueError, OSError) as exc:
            raise ClaimFailed(f"the server's counters are not available at {self.url}: {exc}") from None


@dataclass
class Example:
    """One run of one example: its clients, meter, claims, the names it created, its notes."""

    connection_string: str
    name: str
    meter: Meter = field(default_factory=Meter)
    claims: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings_seen: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    log: Callable[[str], None] = print

    def __post_init__(self) -> None:
        hook = self.meter.hook
        self.table_service = TableServiceClient.from_connection_string(
            self.connection_string, raw_response_hook=hook
        )
        self._blob_service: BlobServiceClient | None = None
        self.insight = Insight(self.table_service.url, self.connection_string)
        self._token = uuid.uuid4().hex[:6]
        self._cleanups: list[Callable[[], None]] = []

    # ---------------------------------------------------------------------------- naming

    def unique(self, base: str) -> str:
        """A table name (letters and digits) of this run: examples never meet each other's data."""
        return f"ex{self._token}{base}"

    # ---------------------------------------------------------------------------- resources

    def table(self, base: str, **client_options: Any) -> TableClient:
        """Create a table of this run (deleted afterwards). ``client_options`` (a retry policy's
        ``retry_total``, …) give the example a client of its own; the meter still sees it."""
        name = self.unique(base)
        with self.operation(f"create table {base}"):
            self.table_service.create_table(name)
        self.tables.append(name)
        self._cleanups.append(lambda: self._delete_table(name))
        if client_options:
            return TableClient.from_connection_string(
                self.connection_string, name, raw_response_hook=self.meter.hook, **client_options
            )
        return self.table_service.get_table_client(name)

    def _delete_table(self, name: str) -> None:
        with contextlib.suppress(ResourceNotFoundError):
            self.table_service.delete_table(name)

    def forget_table(self, name: str) -> None:
        """The example deleted ``name`` itself (that was its point): nothing left to clean up."""
        if name in self.tables:
            self.tables.remove(name)

    def container(self, base: str) -> ContainerClient:
        """Create a blob container of this run (deleted afterwards)."""
        if self._blob_service is None:
            self._blob_service = BlobServiceClient.from_connection_string(
                self.connection_string, raw_response_hook=self.meter.hook
            )
        client = self._blob_service.get_container_client(f"ex{self._token}-{base}")
        with self.operation(f"create container {base}"):
            client.create_container()
        self._cleanups.append(lambda: _quietly(client.delete_container))
        return client

    def queue(self, base: str) -> QueueClient:
        """Create a queue of this run (deleted afterwards)."""
        client = QueueClient.from_connection_string(
            self.connection_string, f"ex{self._token}-{base}", raw_response_hook=self.meter.hook
        )
        with self.operation(f"create queue {base}"):
            client.create_queue()
        self._cleanups.append(lambda: _quietly(client.delete_queue))
        return client

    def on_cleanup(self, action: Callable[[], None]) -> None:
        self._cleanups.append(action)

    def cleanup(self) -> None:
        """Delete what the example created, newest first; a failure here is reported, not raised."""
        with self.meter.operation("clean up"):
            while self._cleanups:
                action = self._cleanups.pop()
                try:
                    action()
                except HttpResponseError as exc:
                    self.notes.append(f"clean-up step failed: {exc.message}")
        self.meter.operations.pop()  # clean-up is not part of the pattern's cost table
        self.table_service.close()
        if self._blob_service is not None:
            self._blob_service.close()

    # ---------------------------------------------------------------------------- measuring

    def operation(self, name: str) -> contextlib.AbstractContextManager[Operation]:
        return self.meter.operation(name)

    def claim(self, holds: bool, text: str) -> None:
        """State what the example shows; a claim that does not hold fails the example."""
        if not holds:
            raise ClaimFailed(text)
        self.claims.append(text)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def table_figures(self, table: str) -> dict[str, Any]:
        """The server's counters for one table of this run (written, read, scanned, queries)."""
        for entry in self.insight.snapshot().get("tables", []):
            if entry.get("table", "").lower() == table.lower():
                figures: dict[str, Any] = entry
                return figures
        raise ClaimFailed(f"the server's counters do not know table {table}: is it Tabulae?")

    def counters(self) -> list[str]:
        """What the server counted for each table this example still has, one line each (empty
        when the server has no counters to give: not Tabulae, or not reachable)."""
        try:
            snapshot = self.insight.snapshot()
        except ClaimFailed:
            return []
        by_name = {str(entry.get("table", "")).lower(): entry for entry in snapshot.get("tables", [])}
        lines = []
        for name in self.tables:
            entry = by_name.get(name.lower())
            if entry is None:
                continue
            queries = ", ".join(f"{k} {v}" for k, v in entry.get("queries", {}).items() if v) or "none"
            lines.append(
                f"{name.removeprefix('ex' + self._token)}: {entry['requests']} requests, "
                f"{entry['written']} written, {entry['read']} read, {entry['scanned']} scanned, "
                f"{entry['partitions']} partition(s); queries: {queries}"
            )
        return lines

    def warnings(self, table: str, kind: str | None = None) -> list[dict[str, Any]]:
        """The server's current warnings about one table of this run (of one kind), remembered
        for the example's report."""
        found = [
            w
            for w in self.insight.snapshot().get("warnings", [])
            if (w.get("table") or "").lower() == table.lower() and (kind is None or w.get("kind") == kind)
        ]
        for warning in found:
            text = f"{warning['kind']}: {warning['message']}"
            if text not in self.warnings_seen:
                self.warnings_seen.append(text)
        return found

    def targets(self) -> dict[str, float]:
        """The scalability targets the server counts against (enforced or not)."""
        targets: dict[str, float] = self.insight.snapshot().get("targets", {})
        return targets


def _quietly(action: Callable[[], Any]) -> None:
    with contextlib.suppress(ResourceNotFoundError):
        action()


def refused(action: Callable[[], object], status: int, code: str) -> bool:
    """Run ``action``; whether the service refused it with ``status`` and error ``code`` (an
    action that succeeds, or fails otherwise, is not that refusal)."""
    try:
        action()
    except HttpResponseError as exc:
        return exc.status_code == status and error_code(exc) == code
    return False


def error_code(exc: HttpResponseError) -> str | None:
    """The service's error code of a refused request: the SDK's, the header, or the body's."""
    code = getattr(exc, "error_code", None)
    if code:
        return str(getattr(code, "value", code))  # the SDKs' enums carry the service's text
    response: Any = exc.response
    if response is None:
        return None
    header = response.headers.get("x-ms-error-code")
    if header:
        return str(header)
    try:
        body = json.loads(response.text())
    except (ValueError, TypeError):
        return None
    error = body.get("odata.error", {}) if isinstance(body, dict) else {}
    return error.get("code") if isinstance(error, dict) else None
