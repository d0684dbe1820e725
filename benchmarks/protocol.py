"""Wire shapes of the benchmark requests, as the Python SDK (azure-data-tables 12.7) sends them.

One definition serves three users, so that they cannot drift apart: the Lua data files that wrk
replays, the preloading client, and the validation pass that checks every workload's requests
before timing. Bodies that vary per key are kept as *fragments* around the key values, so that the
Lua side only concatenates strings.
"""

from __future__ import annotations

import json
import urllib.parse
import uuid
from dataclasses import dataclass

from signing import ACCOUNT, authorization

API_VERSION = "2019-02-02"
ACCEPT_MINIMAL = "application/json;odata=minimalmetadata"
ENTITY_BYTES = 1024  # target size of one entity's JSON body
_PK_MARK = "@@PK@@"
_RK_MARK = "@@RK@@"


@dataclass(frozen=True)
class Shape:
    """Method and negotiated headers of one kind of request."""

    method: str
    content_type: str  # "" when the request has no body
    accept: str
    max_version: bool = False  # MaxDataServiceVersion, sent by the SDK on $batch only


INSERT = Shape("POST", "application/json;odata=nometadata", ACCEPT_MINIMAL)
GET = Shape("GET", "", ACCEPT_MINIMAL)
MERGE = Shape("PATCH", "application/json", "application/json")


def batch_shape(boundary: str) -> Shape:
    """The outer ``$batch`` request: its Content-Type (and so its signature) names the boundary."""
    return Shape("POST", f"multipart/mixed; boundary={boundary}", "application/json", max_version=True)


def header_lines(shape: Shape, host: str, date: str) -> list[tuple[str, str]]:
    """Headers of a request of ``shape``, in SDK order, without Authorization and Content-Length."""
    lines = [("Host", host), ("Accept", shape.accept)]
    lines += [("x-ms-version", API_VERSION), ("DataServiceVersion", "3.0")]
    if shape.max_version:
        lines.append(("MaxDataServiceVersion", "3.0;NetFx"))
    if shape.content_type:
        lines.append(("Content-Type", shape.content_type))
    lines += [("x-ms-date", date), ("Date", date)]
    return lines


def header_block(shape: Shape, host: str, date: str) -> str:
    """``header_lines`` rendered as CRLF-terminated lines, the constant part of a raw request."""
    return "".join(f"{name}: {value}\r\n" for name, value in header_lines(shape, host, date))


def sign(shape: Shape, path: str, date: str) -> str:
    """Authorization for ``shape`` on ``path`` (the raw path; any query string is dropped)."""
    return authorization(shape.method, path.split("?", 1)[0], shape.content_type, date)


def table_path(table: str) -> str:
    """Path of a table's entity collection, for inserts."""
    return f"/{ACCOUNT}/{table}"


def quote_key(value: str) -> str:
    """A key as the Python SDK writes it in a URL: quotes doubled, then everything percent-encoded."""
    return urllib.parse.quote(value.replace("'", "''"), safe="")


def entity_path(table: str, pk: str, rk: str) -> str:
    """Path of one entity (Get Entity, Merge)."""
    return f"/{ACCOUNT}/{table}(PartitionKey='{quote_key(pk)}',RowKey='{quote_key(rk)}')"


def query_path(table: str, filter_text: str) -> str:
    """Path plus query string of a Query Entities request with ``$filter``, encoded as the SDK does."""
    return f"/{ACCOUNT}/{table}()?$filter={urllib.parse.quote(filter_text, safe='')}"


def entity_json(pk: str, rk: str, tag: str = "hay") -> str:
    """A ~1 KiB entity body in the SDK's serialisation: typed keys, a few properties, a long string."""
    fields = {
        "PartitionKey": pk,
        "PartitionKey@odata.type": "Edm.String",
        "RowKey": rk,
        "RowKey@odata.type": "Edm.String",
        "tag": tag,
        "tag@odata.type": "Edm.String",
        "n": 7,
        "ratio": 0.5,
        "flag": True,
        "payload": "",
        "payload@odata.type": "Edm.String",
    }
    base = len(json.dumps(fields)) - len(pk) - len(rk)
    fields["payload"] = "x" * max(0, ENTITY_BYTES - base - 16)
    return json.dumps(fields)


def entity_fragments(tag: str = "hay") -> list[str]:
    """``entity_json`` split around its keys: ``[before_pk, between, after_rk]``.

    Keys in these benchmarks contain only characters JSON leaves alone, so plain concatenation
    ``f[0] + pk + f[1] + rk + f[2]`` reproduces ``entity_json(pk, rk)`` up to the payload length.
    """
    text = entity_json(_PK_MARK, _RK_MARK, tag)
    head, rest = text.split(_PK_MARK)
    middle, tail = rest.split(_RK_MARK)
    return [head, middle, tail]


def fill(fragments: list[str], pk: str, rk: str) -> str:
    """Python twin of the Lua body builder."""
    return fragments[0] + pk + fragments[1] + rk + fragments[2]


@dataclass(frozen=True)
class BatchTemplate:
    """A ``$batch`` of inserts into one table, exactly in the Python SDK's byte layout.

    A body is ``start + Σ part(i) + end`` where
    ``part(i) = part_a + str(i) + part_b + str(len(json)) + part_c + json + "\\r\\n"``.
    """

    boundary: str
    start: str
    part_a: str
    part_b: str
    part_c: str
    end: str

    @classmethod
    def create(cls, host: str, table: str, date: str) -> BatchTemplate:
        """A template with fresh boundaries, as the SDK draws a new one per transaction."""
        boundary = f"batch_{uuid.uuid4()}"
        changeset = f"changeset_{uuid.uuid4()}"
        start = f"--{boundary}\r\nContent-Type: multipart/mixed; boundary={changeset}\r\n\r\n"
        part_a = (
            f"--{changeset}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n"
            "Content-ID: "
        )
        part_b = (
            f"\r\n\r\nPOST http://{host}/{ACCOUNT}/{table} HTTP/1.1\r\n"
            "Content-Type: application/json\r\nContent-Length: "
        )
        part_c = (
            f"\r\nx-ms-version: {API_VERSION}\r\nDataServiceVersion: 3.0\r\nAccept: {ACCEPT_MINIMAL}\r\n"
            f"x-ms-date: {date}\r\nDate: {date}\r\n\r\n"
        )
        end = f"--{changeset}--\r\n\r\n--{boundary}--\r\n"
        return cls(boundary, start, part_a, part_b, part_c, end)

    def body(self, bodies: list[str]) -> bytes:
        """The multipart body for these entity JSON bodies."""
        parts = [self.start]
        for index, text in enumerate(bodies):
            parts.append(f"{self.part_a}{index}{self.part_b}{len(text.encode())}{self.part_c}{text}\r\n")
        parts.append(self.end)
        return "".join(parts).encode("utf-8")


def lua_string(value: str) -> str:
    """A Lua string literal for ``value`` (long brackets would turn CRLF into LF)."""
    out = ['"']
    for char in value:
        code = ord(char)
        if char == "\\":
            out.append("\\\\")
        elif char == '"':
            out.append('\\"')
        elif char == "\r":
            out.append("\\r")
        elif char == "\n":
            out.append("\\n")
        elif code < 32 or code == 127:
            out.append(f"\\{code:03d}")
        elif code > 127:
            out.extend(f"\\{byte:03d}" for byte in char.encode("utf-8"))
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def lua_value(value: object) -> str:
    """Render str/int/float/bool/list/dict as a Lua constructor."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return lua_string(value)
    if isinstance(value, list):
        return "{" + ", ".join(lua_value(item) for item in value) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"[{lua_string(str(k))}] = {lua_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot render {type(value).__name__} as Lua")
