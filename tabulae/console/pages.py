"""What a console page is: the unit by which a service plugs into the console.

A page has a ``slug`` (its path under ``/-/console/``), a ``title`` for the navigation bar, and
its routes. The composition root builds one page per service the server runs (tables and the
partition insight, queues and blobs) and hands the list to
:func:`tabulae.console.app.build_console`. A page's handlers are reached only by a signed-in
session whose POST carried its CSRF token; they call their service as that session's account
(:func:`tabulae.console.render.account_of`) and render with :func:`tabulae.console.render.render`.
"""

from __future__ import annotations

from typing import Protocol

from starlette.routing import BaseRoute


class ConsolePage(Protocol):
    slug: str  # "tables" -> /-/console/tables
    title: str  # shown in the navigation bar

    def routes(self) -> list[BaseRoute]:
        """The page's routes, relative to ``/-/console`` (each starting with ``/`` + slug)."""
        ...
