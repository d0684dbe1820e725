"""The queues page: queues with their depth, and a queue's messages (peek, put, clear).

Depth and poison counts come from the store's figures (the same ones ``/metrics`` reports),
read once per page for the whole account; messages are *peeked*, never taken, so looking at a
queue changes nothing for its consumers. A message dequeued more times than the poison
threshold is marked, with the insight counters' warning: consumers keep failing on it.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tabulae.admission.queue_guard import GuardedQueueService
from tabulae.console.render import account_of, form_of, redirect, render
from tabulae.insight.queues import QueueInsight
from tabulae.model.errors import ServiceError

PEEK = 32  # the most messages Peek Messages returns
DONE = {
    "created": "Queue {name} created.",
    "deleted": "Queue {name} deleted.",
    "put": "Message added.",
    "cleared": "Queue cleared.",
}


def _moment(microseconds: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(microseconds / 1e6)) + "Z"


class QueuesPage:
    """Queues of the signed-in account (see the module docstring)."""

    slug = "queues"
    title = "Queues"

    def __init__(self, service: GuardedQueueService, insight: QueueInsight) -> None:
        self.service = service
        self.insight = insight

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/queues", self.list_queues, methods=["GET"]),
            Route("/queues", self.create_queue, methods=["POST"]),
            Route("/queues/{queue}", self.show_queue, methods=["GET"]),
            Route("/queues/{queue}/put", self.put_message, methods=["POST"]),
            Route("/queues/{queue}/clear", self.clear_queue, methods=["POST"]),
            Route("/queues/{queue}/delete", self.delete_queue, methods=["POST"]),
        ]

    async def _figures(self, account: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Depth and poison per queue of ``account``, and the warnings about its queues."""
        stats = [s for s in await self.service.stats(self.insight.poison_threshold) if s.account == account]
        warnings = [w for w in self.insight.warnings(stats) if w["account"] == account]
        return {s.queue: s for s in stats}, warnings

    async def list_queues(self, request: Request, error: ServiceError | None = None) -> Response:
        account = account_of(request)
        params = request.query_params
        prefix = params.get("prefix", "").strip()
        page = await self.service.list_queues(account, prefix, params.get("marker") or None, None)
        figures, warnings = await self._figures(account)
        done = params.get("done")
        return render(
            request,
            "queues.html",
            status=error.status if error else 200,
            queues=[(name, figures.get(name)) for name, _ in page.queues],
            prefix=prefix,
            next_marker=page.next_marker,
            paged=bool(params.get("marker")),
            warnings=warnings,
            message=DONE[done].format(name=params.get("name", "")) if done in DONE else None,
            error=error,
        )

    async def create_queue(self, request: Request) -> Response:
        name = str(form_of(request).get("name", "")).strip()
        try:
            await self.service.create_queue(account_of(request), name, {})
        except ServiceError as error:
            return await self.list_queues(request, error)
        return redirect("/queues", done="created", name=name)

    async def show_queue(self, request: Request, error: ServiceError | None = None) -> Response:
        account, queue = account_of(request), request.path_params["queue"]
        metadata, count = await self.service.get_queue_properties(account, queue)
        messages = await self.service.peek_messages(account, queue, PEEK)
        figures, warnings = await self._figures(account)
        threshold = self.insight.poison_threshold
        done = request.query_params.get("done")
        return render(
            request,
            "queue.html",
            status=error.status if error else 200,
            queue=queue,
            metadata=metadata,
            count=count,
            stats=figures.get(queue),
            threshold=threshold,
            messages=[
                {
                    "id": m.id,
                    "text": m.text,
                    "inserted": _moment(m.inserted),
                    "expires": "never" if m.expires >= 2**62 else _moment(m.expires),
                    "dequeues": m.dequeue_count,
                    "poison": m.dequeue_count > threshold,
                }
                for m in messages
            ],
            warnings=[w for w in warnings if w.get("queue") == queue],
            message=DONE.get(done) if done in ("put", "cleared") else None,
            error=error,
        )

    async def put_message(self, request: Request) -> Response:
        account, queue = account_of(request), request.path_params["queue"]
        form = form_of(request)
        try:
            ttl_text = str(form.get("ttl", "")).strip()
            delay_text = str(form.get("delay", "")).strip()
            ttl = int(ttl_text) if ttl_text else None
            delay = int(delay_text) if delay_text else None
            await self.service.put_message(account, queue, str(form.get("text", "")), delay, ttl)
        except ValueError:
            return await self.show_queue(request, ServiceError("InvalidInput", "Seconds are whole numbers."))
        except ServiceError as error:
            return await self.show_queue(request, error)
        return redirect(f"/queues/{queue}", done="put")

    async def clear_queue(self, request: Request) -> Response:
        account, queue = account_of(request), request.path_params["queue"]
        await self.service.clear_messages(account, queue)
        return redirect(f"/queues/{queue}", done="cleared")

    async def delete_queue(self, request: Request) -> Response:
        account, queue = account_of(request), request.path_params["queue"]
        if str(form_of(request).get("confirm", "")) != queue:
            error = ServiceError("InvalidInput", f"Type the queue's name, {queue}, to confirm deleting it.")
            return await self.show_queue(request, error)
        await self.service.delete_queue(account, queue)
        return redirect("/queues", done="deleted", name=queue)
