"""Conditional headers ("Specifying Conditional Headers for Blob Service Operations").

The front-end parses ``If-Match``, ``If-None-Match``, ``If-Modified-Since`` and
``If-Unmodified-Since`` into :class:`Conditions`; these functions decide against a record's
ETag and Last-Modified. Reads answer an unmet If-None-Match or If-Modified-Since with 304 and
an unmet If-Match or If-Unmodified-Since with 412 (and ``If-None-Match: *`` with 400
UnsatisfiableCondition); writes answer every unmet condition with 412.
When both headers of a pair are given, the ETag one decides (RFC 9110 §13.2.2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from tabulae.blob.rules import tags as tag_rules
from tabulae.model.edm import TICKS_PER_SECOND, UNIX_EPOCH_TICKS
from tabulae.model.errors import ServiceError


@dataclass(frozen=True, slots=True)
class Conditions:
    """ETags without quotes (``*`` allowed); dates in epoch seconds."""

    if_match: tuple[str, ...] | None = None
    if_none_match: tuple[str, ...] | None = None
    if_modified_since: int | None = None
    if_unmodified_since: int | None = None
    if_tags: tag_rules.Node | None = None  # x-ms-if-tags, parsed
    # Not a header: the request's SAS may create the blob but not replace it ("c" without
    # "w"), so a write onto an existing one is refused (403 UnauthorizedBlobOverwrite).
    create_only: bool = False

    @property
    def empty(self) -> bool:
        return (
            self.if_match is None
            and self.if_none_match is None
            and self.if_modified_since is None
            and self.if_unmodified_since is None
            and self.if_tags is None
        )


NONE = Conditions()


def etag_of(ticks: int) -> str:
    """Azure's ETag form: the modification time in .NET ticks, as upper-case hex."""
    return f"0x{ticks:X}"


def modified_second(ticks: int) -> int:
    """Last-Modified in epoch seconds (the header's one-second resolution)."""
    return (ticks - UNIX_EPOCH_TICKS) // TICKS_PER_SECOND


def _matches(tags: tuple[str, ...], etag: str) -> bool:
    return any(tag == "*" or tag == etag for tag in tags)


def not_met(status: int = 412, code: str = "ConditionNotMet") -> ServiceError:
    error = ServiceError(code)
    error.status = status
    return error


def check_satisfiable(conditions: Conditions) -> None:
    """A read with ``If-None-Match: *`` asks for a resource only if there is none: 400
    UnsatisfiableCondition, whether or not the resource exists (Azure's answer since 2016-02-19;
    before, the header was ignored on reads)."""
    if conditions.if_none_match is not None and "*" in conditions.if_none_match:
        raise ServiceError("UnsatisfiableCondition")


def check(
    conditions: Conditions, ticks: int | None, *, read: bool, tags: Mapping[str, str] | None = None
) -> None:
    """Raise unless ``conditions`` hold for a resource modified at ``ticks`` (None: missing)
    whose blob index tags are ``tags``.

    On a missing resource only If-Match and x-ms-if-tags can fail (they need something to
    match); the date conditions have nothing to compare and are ignored, as HTTP asks. An unmet
    x-ms-if-tags is 412 ConditionNotMet, on reads too, once the HTTP conditions held.
    """
    if conditions.empty:
        return
    if read:
        check_satisfiable(conditions)
    if ticks is None:
        if conditions.if_match is not None or conditions.if_tags is not None:
            raise not_met()
        return
    etag = etag_of(ticks)
    second = modified_second(ticks)
    if conditions.if_match is not None:
        if not _matches(conditions.if_match, etag):
            raise not_met()
    elif conditions.if_unmodified_since is not None and second > conditions.if_unmodified_since:
        raise not_met()
    status = 304 if read else 412
    if conditions.if_none_match is not None:
        if _matches(conditions.if_none_match, etag):
            raise not_met(status)
    elif conditions.if_modified_since is not None and second <= conditions.if_modified_since:
        raise not_met(status)
    if conditions.if_tags is not None and not tag_rules.matches(tags or {}, conditions.if_tags):
        raise not_met()


def check_dates_only(conditions: Conditions, ticks: int, *, allow_unmodified: bool = True) -> None:
    """Container operations honour only the date conditions (Set Container Metadata only
    If-Modified-Since); another condition header there is 400 UnsupportedHeader, and
    x-ms-if-tags, a blob's condition, is not looked at."""
    if conditions.if_match is not None or conditions.if_none_match is not None:
        name = "If-Match" if conditions.if_match is not None else "If-None-Match"
        raise ServiceError("UnsupportedHeader", fields=(("HeaderName", name),))
    if not allow_unmodified and conditions.if_unmodified_since is not None:
        raise ServiceError("UnsupportedHeader", fields=(("HeaderName", "If-Unmodified-Since"),))
    check(replace(conditions, if_tags=None), ticks, read=False)  # a container has no tags to test
