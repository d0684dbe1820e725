"""The parse of short query strings is remembered (a SAS client repeats its token on every
request): the answers must be exactly those of a fresh parse, every time, and never shared."""

from __future__ import annotations

from typing import Any

import pytest

from tabulae.http.messages import QUERY_CACHE_LENGTH, Request
from tabulae.model.errors import ServiceError

SAS_QUERY = "se=2026-11-26T21%3A28%3A00Z&sp=r&sv=2019-02-02&tn=bench&sig=a%2Bb%2Fc%3D&x=1&x=2&empty="


def _request(query: str) -> Request:
    scope: dict[str, Any] = {
        "method": "GET",
        "path": "/devstoreaccount1/bench()",
        "raw_path": b"/devstoreaccount1/bench()",
        "query_string": query.encode("latin-1"),
        "headers": [],
        "client": ("127.0.0.1", 1),
    }
    return Request.from_scope(scope)


def test_repeated_query_parses_the_same_each_time() -> None:
    first = _request(SAS_QUERY)
    expected_pairs = [
        ("se", "2026-11-26T21:28:00Z"), ("sp", "r"), ("sv", "2019-02-02"), ("tn", "bench"),
        ("sig", "a+b/c="), ("x", "1"), ("x", "2"), ("empty", ""),
    ]  # fmt: skip
    assert first.query_pairs == expected_pairs
    assert first.query["x"] == "1,2"
    for _ in range(3):
        again = _request(SAS_QUERY)
        assert again.query_pairs == expected_pairs
        assert again.query == first.query


def test_a_request_changing_its_parse_does_not_change_the_next_one() -> None:
    first = _request(SAS_QUERY)
    first.query_pairs.append(("sig", "forged"))
    first.query["sp"] = "raud"
    second = _request(SAS_QUERY)
    assert ("sig", "forged") not in second.query_pairs
    assert second.query["sp"] == "r"


def test_undecodable_query_is_refused_every_time() -> None:
    for _ in range(2):
        with pytest.raises(ServiceError) as caught:
            _ = _request("sig=%ff%fe").query
        assert caught.value.code == "InvalidQueryParameterValue"


def test_long_query_strings_are_parsed_too() -> None:
    value = "v" * (QUERY_CACHE_LENGTH + 10)
    assert _request(f"$filter={value}&sp=r").query == {"$filter": value, "sp": "r"}
