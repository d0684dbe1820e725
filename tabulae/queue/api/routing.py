"""From a request's host and raw path to the account and queue resource it addresses.

The Queue service's URLs ("Addressing Queue service resources"), after the account (path-style
``http://127.0.0.1:10001/account/...`` or host-style ``https://account.queue.core.windows.net/...``):
``/`` the service, ``/{queue}``, ``/{queue}/messages`` and ``/{queue}/messages/{messageid}``.
Names are checked by the service, so a bad name gets its own error rather than a routing one.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tabulae.http.addressing import decode_segments, locate_account
from tabulae.model.errors import ServiceError


class Resource(enum.Enum):
    SERVICE = "service"  # account root: listing, service properties and stats
    QUEUE = "queue"  # /{queue}
    MESSAGES = "messages"  # /{queue}/messages
    MESSAGE = "message"  # /{queue}/messages/{messageid}


@dataclass(slots=True)  # not frozen: built on every request; frozen ones build slower
class Route:
    account: str
    secondary: bool
    resource: Resource
    base: str  # {scheme}://{host}[/{account}]: the endpoint as the client addressed it
    queue: str = ""
    message_id: str = ""


def resolve(scheme: str, host: str, raw_path: str, accounts: dict[str, list[bytes]]) -> Route:
    """Work out the account, whether the secondary alias was used, and the resource."""
    account, secondary, base, segments = locate_account(scheme, host, decode_segments(raw_path)[1:], accounts)
    if not segments:
        return Route(account, secondary, Resource.SERVICE, base)
    if len(segments) == 1:
        return Route(account, secondary, Resource.QUEUE, base, segments[0])
    if segments[1] != "messages" or len(segments) > 3 or not segments[0]:
        raise ServiceError("InvalidUri")
    if len(segments) == 2:
        return Route(account, secondary, Resource.MESSAGES, base, segments[0])
    return Route(account, secondary, Resource.MESSAGE, base, segments[0], segments[2])
