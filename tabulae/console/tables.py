"""The tables page: tables, a paged grid of entities, typed editing with ETags, and the query box.

Each grid page is one Query Entities page of the service (at most 1,000 entities, continuation
tokens in the links, and the tokens of the pages before it for the way back: :mod:`.trail`), so a
table of any size is browsed a page at a time, and never counted; the table list pages
the same way (1,000 names, and a prefix box) for accounts with thousands of tables. Every query
shows what it cost: its class and the entities it scanned, with the design guide's advice when
it scanned far more than it returned (:mod:`.advice`), and the insight counters' warnings
about the table.

Writes carry the ETag of the version the form was loaded from, so a change made meanwhile by
anyone else is reported as the conflict it is (412 ``UpdateConditionNotSatisfied``), with the
newer version beside the user's edits, instead of being overwritten.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tabulae.console.advice import QueryCost
from tabulae.console.render import account_of, form_of, keys_of, query_string, redirect, render
from tabulae.console.trail import Trail
from tabulae.console.typed import (
    TYPES,
    FieldRow,
    entity_from_rows,
    rows_from_form,
    rows_of,
    settle_rows,
    short_type,
)
from tabulae.console.typed import value_text as typed_text
from tabulae.model import edm
from tabulae.model.entity import StoredEntity
from tabulae.model.errors import ServiceError
from tabulae.model.mutation import Mutation, MutationKind
from tabulae.table.service import INDEX_TYPES, MAX_PAGE, TableService, check_top

GRID_CELL_CHARS = 80  # longer values are cut in the grid (the entity page shows them whole)
BLANK_ROWS = 3  # empty property rows offered by an entity form (the script adds more)
KEY_WIDTHS = (8, 16, 24, 32)  # the PartitionKey column's widths, in characters (console.css)

DONE = {
    "created": "Table {name} created.",
    "deleted": "Table {name} deleted.",
    "inserted": "Entity added.",
    "saved": "Entity saved.",
    "removed": "Entity deleted.",
    "indexed": "Index on {name} added: queries use it once it is built.",
    "unindexed": "Index on {name} dropped.",
}


def _prefix_filter(prefix: str) -> str | None:
    """``TableName`` range of a name prefix (names are ASCII letters and digits)."""
    if not prefix:
        return None
    upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    return f"TableName ge '{prefix}' and TableName lt '{upper}'"


def _cell(kind: str, value: Any) -> dict[str, Any]:
    text = typed_text(kind, value)
    shown = text if len(text) <= GRID_CELL_CHARS else text[: GRID_CELL_CHARS - 1] + "…"
    return {"text": shown, "type": short_type(kind), "full": len(shown) != len(text)}


def key_width(rows: list[dict[str, Any]]) -> int:
    """The width class (in characters) of the grid's PartitionKey column: the next step up from
    the page's longest key (a longer key is cut, whole in its tooltip). A step of the style
    sheet, as the column stays put beside the RowKey when the grid scrolls sideways, and the
    page's policy allows no inline style."""
    longest = max((len(row["pk"]) for row in rows), default=0)
    return next((width for width in KEY_WIDTHS if longest <= width), KEY_WIDTHS[-1])


def _grid(entities: list[StoredEntity], select: list[str] | None) -> tuple[list[str], list[dict[str, Any]]]:
    """The columns present in this page (first appearance order, or ``$select``'s) and its rows."""
    columns: dict[str, None] = dict.fromkeys(select) if select else {}
    rows = []
    for entity in entities:
        properties = entity.properties()
        if not select:
            for name in properties:
                columns.setdefault(name, None)
        cells = {name: _cell(kind, value) for name, (kind, value) in properties.items()}
        rows.append({"pk": entity.pk, "rk": entity.rk, "timestamp": entity.timestamp, "cells": cells})
    return list(columns), rows


def _select(text: str) -> list[str] | None:
    names = [name.strip() for name in text.split(",") if name.strip()]
    names = [name for name in names if name not in ("PartitionKey", "RowKey", "Timestamp", "*")]
    return names or None


class TablesPage:
    """Tables and entities of the signed-in account (see the module docstring)."""

    slug = "tables"
    title = "Tables"

    def __init__(
        self, service: TableService, warnings: Callable[[], Awaitable[list[dict[str, Any]]]] | None = None
    ) -> None:
        self.service = service
        self.warnings = warnings  # the server's insight warnings (every worker's counts)

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/tables", self.list_tables, methods=["GET"]),
            Route("/tables", self.create_table, methods=["POST"]),
            Route("/tables/{table}", self.grid, methods=["GET"]),
            Route("/tables/{table}/delete", self.delete_table, methods=["POST"]),
            Route("/tables/{table}/indexes", self.add_index, methods=["POST"]),
            Route("/tables/{table}/indexes/{prop}/drop", self.drop_index, methods=["POST"]),
            Route("/tables/{table}/new", self.new_entity, methods=["GET"]),
            Route("/tables/{table}/new", self.insert_entity, methods=["POST"]),
            Route("/tables/{table}/e/{key}", self.show_entity, methods=["GET"]),
            Route("/tables/{table}/e/{key}", self.save_entity, methods=["POST"]),
            Route("/tables/{table}/e/{key}/delete", self.delete_entity, methods=["POST"]),
        ]

    # ------------------------------------------------------------------------------- tables

    async def list_tables(self, request: Request, error: ServiceError | None = None) -> Response:
        account = account_of(request)
        prefix = request.query_params.get("prefix", "").strip()
        token = request.query_params.get("next") or None
        names: list[str] = []
        next_token = None
        if prefix and not prefix.isalnum():
            error = error or ServiceError("InvalidInput", "A table name prefix has only letters and digits.")
        else:
            page = await self.service.query_tables(account, _prefix_filter(prefix), None, token)
            names, next_token = page.names, page.next_token
        done = request.query_params.get("done")
        message = DONE[done].format(name=request.query_params.get("name", "")) if done in DONE else None
        return render(
            request,
            "tables.html",
            status=error.status if error else 200,
            names=names,
            prefix=prefix,
            next_token=next_token,
            paged=token is not None,
            message=message,
            error=error,
        )

    async def create_table(self, request: Request) -> Response:
        name = str(form_of(request).get("name", "")).strip()
        try:
            await self.service.create_table(account_of(request), name)
        except ServiceError as error:
            return await self.list_tables(request, error)
        return redirect("/tables", done="created", name=name)

    async def delete_table(self, request: Request) -> Response:
        table = request.path_params["table"]
        if str(form_of(request).get("confirm", "")) != table:
            error = ServiceError("InvalidInput", f"Type the table's name, {table}, to confirm deleting it.")
            return await self.grid(request, error)
        await self.service.delete_table(account_of(request), table)
        return redirect("/tables", done="deleted", name=table)

    async def add_index(self, request: Request) -> Response:
        """Declare a property index; it builds in the background (the page does not wait)."""
        table = request.path_params["table"]
        form = form_of(request)
        prop = str(form.get("property", "")).strip()
        try:
            await self.service.add_index(
                account_of(request), table, prop, str(form.get("type", "Edm.String")), wait=False
            )
        except ServiceError as error:
            return await self.grid(request, error)
        return redirect(f"/tables/{table}", done="indexed", name=prop)

    async def drop_index(self, request: Request) -> Response:
        table, prop = request.path_params["table"], request.path_params["prop"]
        try:
            await self.service.drop_index(account_of(request), table, prop)
        except ServiceError as error:
            return await self.grid(request, error)
        return redirect(f"/tables/{table}", done="unindexed", name=prop)

    # ------------------------------------------------------------------------------ the grid

    async def grid(self, request: Request, error: ServiceError | None = None) -> Response:
        account = account_of(request)
        table = request.path_params["table"]
        params = request.query_params
        filter_text = params.get("filter", "").strip()
        select_text = params.get("select", "").strip()
        top_text = params.get("top", "").strip()
        columns: list[str] = []
        rows: list[dict[str, Any]] = []
        cost = None
        next_keys: tuple[str, str] | None = None
        trail = Trail.of(params)
        try:
            await self.service.require_table(account, table)
            top = check_top(top_text)
            top = MAX_PAGE if top is None else top
            page = await self.service.query_entities(
                account, table, filter_text or None, top, trail.here.np or None, trail.here.nr or None
            )
        except ServiceError as exc:
            if exc.code in ("TableNotFound", "InvalidResourceName", "OutOfRangeInput") and error is None:
                raise
            error = error or exc
        else:
            columns, rows = _grid(page.entities, _select(select_text))
            cost = QueryCost(page.query_class, page.scanned, len(page.entities))
            if page.next_partition_token and page.next_row_token:
                next_keys = (page.next_partition_token, page.next_row_token)
        done = params.get("done")
        message = DONE.get(done) if done in ("inserted", "saved", "removed", "indexed", "unindexed") else None
        try:
            indexes = await self.service.list_indexes(account, table)
        except ServiceError:
            indexes = []
        query = {"filter": filter_text, "select": select_text, "top": top_text}
        back = trail.previous()
        return render(
            request,
            "table.html",
            status=error.status if error else 200,
            table=table,
            filter=filter_text,
            select=select_text,
            top=top_text,
            columns=columns,
            rows=rows,
            cost=cost,
            first_href=query_string(**query) if not trail.here.first else None,
            previous_href=query_string(**query, **back) if back is not None else None,
            next_href=query_string(**query, **trail.next(next_keys, len(rows))) if next_keys else None,
            here=trail.here,
            key_width=key_width(rows),
            warnings=await self._warnings(account, table),
            message=message.format(name=params.get("name", "")) if message else None,
            indexes=indexes,
            index_types=INDEX_TYPES,
            error=error,
        )

    async def _warnings(self, account: str, table: str) -> list[dict[str, Any]]:
        if self.warnings is None:
            return []
        return [
            warning
            for warning in await self.warnings()
            if warning["account"] == account and (warning["table"] or "").lower() == table.lower()
        ]

    # ----------------------------------------------------------------------------- entities

    def _entity_page(self, request: Request, status: int = 200, **context: Any) -> Response:
        context.setdefault("rows", [])
        context.setdefault("current_rows", None)
        context.setdefault("error", None)
        context.setdefault("conflict", None)
        context.setdefault("mode", "replace")
        blank = [FieldRow("", "Edm.String", "") for _ in range(BLANK_ROWS)]
        return render(
            request,
            "entity.html",
            status=status,
            table=request.path_params["table"],
            types=TYPES,
            blank=blank,
            **context,
        )

    async def new_entity(self, request: Request) -> Response:
        await self.service.require_table(account_of(request), request.path_params["table"])
        return self._entity_page(request, new=True, pk="", rk="", etag="")

    async def insert_entity(self, request: Request) -> Response:
        account, table = account_of(request), request.path_params["table"]
        form = form_of(request)
        pk, rk = str(form.get("pk", "")), str(form.get("rk", ""))
        rows = settle_rows(rows_from_form(form), None)
        try:
            entity = entity_from_rows(pk, rk, rows)
            await self.service.write(
                account, table, Mutation(MutationKind.INSERT, entity.pk, entity.rk, entity.properties)
            )
        except ServiceError as error:
            return self._entity_page(
                request, error.status, new=True, pk=pk, rk=rk, etag="", rows=rows, error=error
            )
        return redirect(f"/tables/{table}", done="inserted")

    def _keys(self, request: Request) -> tuple[str, str]:
        keys = keys_of(request.path_params["key"])
        if keys is None:
            raise ServiceError("ResourceNotFound")
        return keys

    async def show_entity(self, request: Request) -> Response:
        account, table = account_of(request), request.path_params["table"]
        pk, rk = self._keys(request)
        entity = await self.service.get_entity(account, table, pk, rk)
        return self._entity_page(
            request, new=False, pk=pk, rk=rk, etag=entity.etag, timestamp=entity.timestamp,
            rows=rows_of(entity.properties()),
        )  # fmt: skip

    async def save_entity(self, request: Request) -> Response:
        account, table = account_of(request), request.path_params["table"]
        pk, rk = self._keys(request)
        form = form_of(request)
        etag = str(form.get("etag", "")) or "*"
        mode = "merge" if form.get("mode") == "merge" else "replace"
        kind = MutationKind.MERGE if mode == "merge" else MutationKind.REPLACE
        rows = settle_rows(rows_from_form(form), await self._shown_version(account, table, pk, rk, etag))
        try:
            entity = entity_from_rows(pk, rk, rows)
            await self.service.write(account, table, Mutation(kind, pk, rk, entity.properties, etag))
        except ServiceError as error:
            return await self._write_failed(request, error, pk, rk, etag, rows, mode)
        return redirect(f"/tables/{table}", done="saved")

    async def _shown_version(
        self, account: str, table: str, pk: str, rk: str, etag: str
    ) -> edm.Properties | None:
        """The properties of the version the form showed (its ETag), if it is still the current
        one: values sent back unchanged are taken from it exactly (:func:`settle_rows`)."""
        try:
            current = await self.service.get_entity(account, table, pk, rk)
        except ServiceError:
            return None
        return current.properties() if current.etag == etag else None

    async def delete_entity(self, request: Request) -> Response:
        account, table = account_of(request), request.path_params["table"]
        pk, rk = self._keys(request)
        etag = str(form_of(request).get("etag", "")) or "*"
        try:
            await self.service.write(account, table, Mutation(MutationKind.DELETE, pk, rk, None, etag))
        except ServiceError as error:
            return await self._write_failed(request, error, pk, rk, etag, None, "replace")
        return redirect(f"/tables/{table}", done="removed")

    async def _write_failed(
        self,
        request: Request,
        error: ServiceError,
        pk: str,
        rk: str,
        etag: str,
        rows: list[FieldRow] | None,
        mode: str,
    ) -> Response:
        """Show why a write failed; on an ETag conflict, the version that won beside the user's."""
        account, table = account_of(request), request.path_params["table"]
        current: StoredEntity | None = None
        if error.code in ("UpdateConditionNotSatisfied", "ResourceNotFound") or rows is None:
            try:
                current = await self.service.get_entity(account, table, pk, rk)
            except ServiceError:
                current = None
        conflict = None
        if error.code == "UpdateConditionNotSatisfied":
            conflict = "changed" if current is not None else "deleted"
        elif error.code == "ResourceNotFound":
            conflict = "deleted"
        current_rows = rows_of(current.properties()) if current is not None else None
        return self._entity_page(
            request,
            error.status,
            new=False,
            pk=pk,
            rk=rk,
            # The form now carries the winning version's ETag: saving again overwrites *that*
            # version, knowingly; a third writer in between is caught the same way.
            etag=current.etag if current is not None else etag,
            timestamp=current.timestamp if current is not None else None,
            rows=rows if rows is not None else (current_rows or []),
            current_rows=current_rows if conflict else None,
            stale_etag=etag,
            mode=mode,
            error=None if conflict else error,
            conflict=conflict,
        )
