"""Console pieces without a server: sessions, typed text forms, key tokens, advice, heat levels,
blob download names and virtual-directory breadcrumbs."""

from __future__ import annotations

import base64
import math
import time
import urllib.parse
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tabulae.console.advice import QueryCost
from tabulae.console.blobs import attachment, crumbs
from tabulae.console.insight import heat_level
from tabulae.console.render import key_token, keys_of
from tabulae.console.revocations import COMPACT_LINES, Revocations
from tabulae.console.session import Sessions
from tabulae.console.trail import MAX_TRAIL_CHARS, Trail
from tabulae.console.typed import FieldRow, entity_from_rows, rows_of, settle_rows, value_text
from tabulae.model import edm
from tabulae.model.errors import ServiceError

KEY = b"k" * 64
SECRET = b"s" * 32


def test_a_session_lives_while_its_key_does() -> None:
    accounts = {"acct": [KEY]}
    sessions = Sessions(SECRET, accounts)
    session = sessions.sign_in("acct", base64.b64encode(KEY).decode())
    assert session is not None and session.signed_in
    cookie = sessions.encode(session)
    assert sessions.decode(cookie) == session
    accounts["acct"] = [b"n" * 64]  # the key was rotated
    assert sessions.decode(cookie) is None
    accounts["acct"] = [b"n" * 64, KEY]  # ... it is the secondary now
    assert sessions.decode(cookie) == session
    del accounts["acct"]
    assert sessions.decode(cookie) is None


def test_sessions_expire_and_another_servers_secret_does_not_verify() -> None:
    sessions = Sessions(SECRET, {"acct": [KEY]}, max_age=60)
    session = sessions.sign_in("acct", base64.b64encode(KEY).decode())
    assert session is not None
    cookie = sessions.encode(session)
    assert sessions.decode(cookie, now=session.issued + 61) is None
    assert Sessions(b"t" * 32, {"acct": [KEY]}).decode(cookie) is None


def test_csrf_tokens_belong_to_one_session() -> None:
    sessions = Sessions(SECRET, {})
    one, two = sessions.anonymous(), sessions.anonymous()
    assert sessions.check_csrf(one, sessions.csrf_token(one))
    assert not sessions.check_csrf(one, sessions.csrf_token(two))
    assert not sessions.check_csrf(one, None)
    assert not sessions.check_csrf(one, "")


def test_sign_in_refuses_wrong_keys() -> None:
    sessions = Sessions(SECRET, {"acct": [KEY]})
    assert sessions.sign_in("acct", base64.b64encode(b"x" * 64).decode()) is None
    assert sessions.sign_in("other", base64.b64encode(KEY).decode()) is None
    assert sessions.sign_in("acct", "") is None
    with pytest.raises(ValueError):
        Sessions(b"short", {})


EXACT = [
    (edm.STRING, "  spaces kept  "),
    (edm.BOOLEAN, True),
    (edm.INT32, -(2**31)),
    (edm.INT64, 2**63 - 1),
    (edm.INT64, -(2**63)),
    (edm.DOUBLE, math.inf),
    (edm.DOUBLE, -math.inf),
    (edm.DOUBLE, -0.0),
    (edm.DOUBLE, 0.1),
    (edm.DOUBLE, 5e-324),
    (edm.DATETIME, edm.MAX_DATETIME_TICKS),
    (edm.DATETIME, edm.MIN_DATETIME_TICKS + 1),
    (edm.GUID, "0f8fad5b-d9cb-469f-a165-70867728950e"),
    (edm.BINARY, b"\x00\xff" * 10),
]


@pytest.mark.parametrize(("kind", "value"), EXACT)
def test_every_type_reads_back_from_its_text_exactly(kind: str, value: object) -> None:
    entity = entity_from_rows("p", "r", [FieldRow("v", kind, value_text(kind, value))])
    got_kind, got = entity.properties["v"]
    assert got_kind == kind
    assert got == value and (not isinstance(value, float) or math.copysign(1, got) == math.copysign(1, value))


def test_nan_and_typing_mistakes() -> None:
    entity = entity_from_rows("p", "r", [FieldRow("v", edm.DOUBLE, "NaN")])
    assert math.isnan(entity.properties["v"][1])
    for kind, text in ((edm.INT32, "2147483648"), (edm.INT64, "1.5"), (edm.GUID, "nope"), (edm.BINARY, "@@")):
        with pytest.raises(ServiceError):
            entity_from_rows("p", "r", [FieldRow("v", kind, text)])
    for name in ("PartitionKey", "Timestamp", "a@odata.type", "1abc"):
        with pytest.raises(ServiceError):
            entity_from_rows("p", "r", [FieldRow(name, edm.STRING, "x")])


@given(st.integers(edm.INT64_MIN, edm.INT64_MAX), st.floats(allow_nan=False), st.binary(max_size=64))
def test_rows_round_trip(number: int, real: float, data: bytes) -> None:
    properties = {"i": (edm.INT64, number), "d": (edm.DOUBLE, real), "b": (edm.BINARY, data)}
    again = entity_from_rows("p", "r", rows_of(properties)).properties
    assert again == properties


@given(st.text(), st.text())
def test_key_tokens_are_exact(pk: str, rk: str) -> None:
    token = key_token(pk, rk)
    assert "/" not in token and "?" not in token and "#" not in token
    assert keys_of(token) == (pk, rk)


def test_key_tokens_refuse_junk() -> None:
    for junk in ("", "k", "x.y", "k!!.x", "kAA.BB.CC"):
        assert keys_of(junk) is None


def test_advice_only_when_a_query_scans_far_more_than_it_returns() -> None:
    assert QueryCost("table-scan", 5000, 3).advice is not None
    assert QueryCost("table-scan", 50, 0).advice is None  # too small to matter
    assert QueryCost("table-scan", 5000, 1000).advice is None  # returns what it scans
    assert QueryCost("point", 1, 1).advice is None
    assert "RowKey" in (QueryCost("partition-scan", 2000, 1).advice or "")


def test_heat_levels() -> None:
    assert heat_level(0, 100) == 0
    assert heat_level(100, 100) == 9
    assert 1 <= heat_level(1, 10_000) <= 2


@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60))
def test_a_download_name_is_one_safe_header_value(name: str) -> None:
    header = attachment(name)
    assert header.isascii() and "\r" not in header and "\n" not in header
    plain = header.split('filename="', 1)[1].split('"', 1)[0]
    assert '"' not in plain and "\\" not in plain and "/" not in plain
    encoded = header.split("filename*=UTF-8''", 1)[1]
    leaf = name.rsplit("/", 1)[-1] or "blob"
    assert urllib.parse.unquote(encoded) == leaf


def test_breadcrumbs_follow_the_delimiter() -> None:
    assert crumbs("") == [] and crumbs("logs") == []
    assert crumbs("logs/2026/") == [("logs", "logs/"), ("2026", "logs/2026/")]
    assert crumbs("a//b") == [("a", "a/"), ("(empty)", "a//")]


def test_a_value_sent_back_unchanged_is_the_stored_one_exactly() -> None:
    stored: edm.Properties = {
        "crlf": (edm.STRING, "a\r\nb"),
        "cr": (edm.STRING, "a\rb"),
        "lead": (edm.STRING, "\nx"),
        "n": (edm.INT32, 5),
    }
    # What a browser sends back for each, untouched: line breaks as CRLF, the leading one too.
    sent = [
        FieldRow("crlf", edm.STRING, "a\r\nb"),
        FieldRow("cr", edm.STRING, "a\r\nb"),
        FieldRow("lead", edm.STRING, "\r\nx"),
        FieldRow("n", edm.STRING, "5"),  # its type changed: taken as typed
    ]
    settled = {row.name: row.text for row in settle_rows(sent, stored)}
    assert settled == {"crlf": "a\r\nb", "cr": "a\rb", "lead": "\nx", "n": "5"}
    edited = settle_rows(
        [FieldRow("cr", edm.STRING, "b\r\nc"), FieldRow("crlf", edm.STRING, "c\r\nd")], stored
    )
    assert [row.text for row in edited] == ["b\nc", "c\r\nd"]  # LF, unless the stored value had CRLF
    assert settle_rows([FieldRow("new", edm.STRING, "x\r\ny")], None)[0].text == "x\ny"


def test_a_sign_out_in_one_process_is_seen_by_another(tmp_path: Path) -> None:
    one, other = Revocations(tmp_path), Revocations(tmp_path)  # two workers over one directory
    assert not other.revoked("n1")
    one.revoke("n1", int(time.time()) + 3600)
    assert other.revoked("n1") and one.revoked("n1") and not other.revoked("n2")
    with open(tmp_path / "signed-out", "a") as file:
        file.write("99999999999 half")  # a line still being written counts once it is whole
    assert not other.revoked("half")


def test_expired_sign_outs_are_compacted_away_and_live_ones_kept(tmp_path: Path) -> None:
    writer, reader = Revocations(tmp_path), Revocations(tmp_path)
    now = int(time.time())
    writer.revoke("live", now + 3600)
    for number in range(COMPACT_LINES + 1):
        writer.revoke(f"old{number}", now - 1)
    assert reader.revoked("live") and not reader.revoked("old0")
    assert len((tmp_path / "signed-out").read_text().splitlines()) < 10
    writer.revoke("later", now + 3600)
    assert reader.revoked("later") and reader.revoked("live")


def test_the_trail_leads_back_page_by_page_and_forgets_only_its_oldest_pages() -> None:
    first = Trail.of({})
    assert first.previous() is None
    tokens = [(f"1!2!p{n % 10}", f"1!2!r{n % 10}") for n in range(400)]
    params: dict[str, str] = {k: str(v) for k, v in first.next(tokens[0], 1000).items()}
    trail = Trail.of(params)
    assert (trail.here.number, trail.here.offset) == (2, 1000) and trail.previous() == {}
    for number in range(1, 400):  # walk far: the trail stays under its cap
        params = {k: str(v) for k, v in trail.next(tokens[number], 1000).items()}
        trail = Trail.of(params)
        assert len(params["back"]) <= MAX_TRAIL_CHARS
    assert (trail.here.number, trail.here.offset) == (401, 400_000)
    back = trail.previous()
    assert back is not None and (back["pg"], back["o"], back["np"]) == (400, 399_000, tokens[398][0])
    steps = 0
    while (back := trail.previous()) is not None and back:
        trail = Trail.of({k: str(v) for k, v in back.items()})
        steps += 1
    assert 100 < steps < 399 and trail.previous() is None  # its oldest pages were forgotten
    assert Trail.of({"np": "1!2!p0", "nr": "1!2!r0", "back": "x,y,1,2"}).back == []  # not ours
