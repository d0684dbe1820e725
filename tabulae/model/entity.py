"""Entities: reading them from request JSON with the service's validation, and their stored form.

The stored form of an entity's user properties is the compact JSON the service sends in
minimal metadata (``"n@odata.type":"Edm.Int64","n":"5"``, doubles as ``5.0``, no Boolean
annotations). A stored entity is therefore rendered by concatenation, without decoding and
re-encoding, and decoding it again is exact because every type that JSON cannot tell apart
carries its annotation.

Validation follows the data model's limits in the order Azure checks them: keys present, key
characters and size, property count, names and values, then the entity size formula.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from tabulae.model import edm
from tabulae.model.edm import Properties, Property
from tabulae.model.errors import MSG_REQUEST_NOT_VALID, ServiceError
from tabulae.model.names import check_body_key

MAX_PROPERTIES = 255  # including PartitionKey, RowKey and Timestamp
MAX_NAME_LENGTH = 255
MAX_STRING_UTF16 = 32 * 1024
MAX_BINARY_BYTES = 64 * 1024
MAX_ENTITY_BYTES = 1024 * 1024
ANNOTATION = "@odata.type"
SYSTEM_NAMES = frozenset({"PartitionKey", "RowKey", "Timestamp"})

# Typed values written as JSON strings ("Data1": "12345" with "Data1@odata.type": "Edm.Int32") are
# read as the service's .NET parsers read them (invariant culture), and stored as the typed value:
#   Int32, Int64  optional white space, an optional sign, ASCII digits (no thousands, no hex, no
#                 fraction); out of range is refused
#   Double        optional white space and sign, digits with optional thousands commas, an optional
#                 fraction and exponent ("1,000.5", ".5", "5.", "1e3"); "NaN", "Infinity" and
#                 "-Infinity" exactly; an overflow is refused
#   Boolean       "true" or "false" in any case, surrounding white space allowed
#   Guid          the 8-4-4-4-12 form, bare, in braces or in parentheses, or 32 hex digits
#   Binary        base64, white space inside ignored
# White space for numbers is the .NET set: space and TAB to CR.
_WHITE = r"[ \t\n\v\f\r]*"
_INTEGER_TEXT = re.compile(rf"{_WHITE}([+-]?)0*([0-9]{{1,19}}){_WHITE}")  # 19 digits: cheap to parse
_DOUBLE_TEXT = re.compile(rf"{_WHITE}([+-]?)((?:[0-9][0-9,]*)?(?:\.[0-9]*)?)(?:[eE]([+-]?[0-9]+))?{_WHITE}")
_BOOLEANS = {"true": True, "false": False}
_BASE64_WHITE = str.maketrans("", "", " \t\r\n")
_SPECIAL_DOUBLES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_FIXED_SIZES = {edm.BOOLEAN: 1, edm.DATETIME: 8, edm.DOUBLE: 8, edm.GUID: 16, edm.INT32: 4, edm.INT64: 8}


class _FloatText(str):
    """A JSON number with a fraction or exponent, kept as text so overflow can be detected."""

    __slots__ = ()


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


class _Pairs(list[tuple[str, Any]]):
    """A JSON object's members in order, told apart from a JSON array."""

    __slots__ = ()


def parse_json_pairs(body: bytes) -> list[tuple[str, Any]]:
    """Parse a request body that must be one JSON object; keep duplicate names and number text.

    The standard library parser is used on purpose: it keeps duplicate keys (the service
    answers ``DuplicatePropertiesSpecified``), exact big integers, and the text of floats.
    """
    try:
        value = json.loads(
            body.decode("utf-8"),
            object_pairs_hook=_Pairs,
            parse_float=_FloatText,
            parse_constant=_reject_constant,
        )
    except (ValueError, RecursionError) as exc:
        raise ServiceError("InvalidInput", MSG_REQUEST_NOT_VALID) from exc
    if not isinstance(value, _Pairs):
        raise ServiceError("InvalidInput", MSG_REQUEST_NOT_VALID)
    return value


# A JSON string token, and the colon after it when the string is an object key. Scanning a valid
# document from the left, every match starts at a string's opening quote (outside strings JSON has
# no quotes), so the matches with a colon are exactly the document's object keys.
_STRING_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"(\s*:)?')


def _key_count(body: bytes) -> int:
    found = _STRING_TOKEN.findall(body)
    return len(found) - found.count(b"")


def _unique_object(body: bytes) -> dict[str, Any] | None:
    """The body as a dict, parsed by orjson, when that is provably what the standard parser
    would read: one JSON object without repeated names. ``None`` sends the caller to the slow,
    exact path (which also produces the right error for anything invalid).

    orjson keeps the last of repeated names, so the dict's size is checked against the number
    of names in the text: a body with no more colons than the dict has keys cannot repeat one
    (each name is followed by a colon outside strings), and otherwise the names are counted.
    """
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if type(value) is not dict:
        return None
    size = len(value)
    colons = body.count(b":")
    if colons != size and not _colons_are_separators(value, colons, body) and _key_count(body) != size:
        return None
    return value


def _colons_are_separators(value: dict[str, Any], colons: int, body: bytes) -> bool:
    """Whether the body's colons are those of the parsed object, written again by orjson: one per
    member, and those its strings hold (a time, a URL).

    Without a backslash in the body no string escapes a colon, and orjson escapes none, so the
    two counts agree exactly when no name is repeated (at any depth): a repeated name adds a
    colon of its own to the body, and its value may add more, never fewer.
    """
    if b"\\" in body:
        return False
    try:
        return orjson.dumps(value).count(b":") == colons
    except orjson.JSONEncodeError:
        return False


def entity_from_body(body: bytes, url_keys: tuple[str, str] | None = None) -> Entity:
    """Read and validate a request's entity JSON (see :func:`entity_from_pairs`).

    The common body, an object without repeated names, is parsed by orjson; numbers then arrive
    as ``int`` or ``float`` where the exact parser gives ``int`` or float text, which
    :func:`typed_value` treats alike (a number orjson cannot hold exactly, an integer past
    64 bits or a double that overflows, fails there or reads as the same double).
    """
    fields = _unique_object(body)
    if fields is None:
        return entity_from_pairs(parse_json_pairs(body), url_keys)
    shape = _shape_of(fields, url_keys)
    if shape is None:
        return entity_from_pairs(fields.items(), url_keys)
    return _entity_by_shape(fields, shape, url_keys)


@dataclass(slots=True)
class Entity:
    """An entity as a request carries it: keys and typed user properties (no Timestamp)."""

    pk: str
    rk: str
    properties: Properties


@dataclass(slots=True)
class StoredEntity:
    """An entity as storage returns it: keys, Timestamp ticks and the stored property JSON.

    Not frozen, though nothing changes one: a frozen dataclass costs three times as much to
    build, and scans build one per row.
    """

    pk: str
    rk: str
    ticks: int
    blob: bytes

    @property
    def timestamp(self) -> str:
        return edm.format_datetime(self.ticks)

    @property
    def etag(self) -> str:
        return edm.etag_of_ticks(self.ticks)

    def properties(self, only: frozenset[str] | None = None) -> Properties:
        return decode_properties(self.blob, only)


def _invalid() -> ServiceError:
    return ServiceError("InvalidInput", MSG_REQUEST_NOT_VALID)


def _check_string(value: str) -> str:
    if value.isascii():
        if len(value) > MAX_STRING_UTF16:
            raise ServiceError("PropertyValueTooLarge")
        return value
    try:
        units = len(value.encode("utf-16-le")) // 2
    except UnicodeEncodeError as exc:  # a lone surrogate escaped in the JSON
        raise _invalid() from exc
    if units > MAX_STRING_UTF16:
        raise ServiceError("PropertyValueTooLarge")
    return value


def _to_double(value: Any) -> float:
    if type(value) is float:
        return value  # orjson's reading of a number with a fraction or exponent (never infinite)
    if isinstance(value, bool):
        raise _invalid()
    if isinstance(value, _FloatText):
        result = float(value)  # a JSON number's own text
    elif isinstance(value, int):
        result = float(value)
    elif isinstance(value, str):
        special = _SPECIAL_DOUBLES.get(value.strip(" \t\n\v\f\r"))
        if special is not None:
            return special  # NaN and the infinities by name only
        result = _double_text(value)
    else:
        raise _invalid()
    if math.isinf(result):
        raise _invalid()  # overflow: above 1.7976931348623157E+308
    return result


def _double_text(value: str) -> float:
    """A Double written as a string (see the table above), other than by name."""
    match = _DOUBLE_TEXT.fullmatch(value)
    if match is None or not any(c.isdigit() for c in match[2]):
        raise _invalid()
    sign, mantissa, exponent = match.groups()
    return float(f"{sign}{mantissa.replace(',', '')}e{exponent or 0}")


def _to_int(value: Any, low: int, high: int) -> int:
    if isinstance(value, (bool, _FloatText)):
        raise _invalid()
    if isinstance(value, str):
        match = _INTEGER_TEXT.fullmatch(value)
        if match is None:
            raise _invalid()
        value = int(match[1] + match[2])
    if not isinstance(value, int) or not low <= value <= high:
        raise _invalid()
    return value


def _to_boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and not isinstance(value, _FloatText):
        parsed = _BOOLEANS.get(value.strip().lower())
        if parsed is not None:
            return parsed
    raise _invalid()


def _to_datetime(name: str, value: Any) -> int:
    if not isinstance(value, str):
        raise _invalid()
    ticks = edm.parse_datetime(value)
    if ticks is None:
        raise _invalid()
    if not edm.MIN_DATETIME_TICKS <= ticks <= edm.MAX_DATETIME_TICKS:
        if ticks < 0:
            raise _invalid()
        shown = edm.format_datetime_legacy(min(ticks, edm.MAX_DATETIME_TICKS))
        raise ServiceError("OutOfRangeInput", f"The '{name}' parameter of value '{shown}' is out of range.")
    return ticks


def _to_binary(value: Any) -> bytes:
    if not isinstance(value, str):
        raise _invalid()
    try:
        data = base64.b64decode(value.translate(_BASE64_WHITE), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _invalid() from exc
    if len(data) > MAX_BINARY_BYTES:
        raise ServiceError("PropertyValueTooLarge")
    return data


def _check_null(annotation: str | None) -> None:
    """A JSON null is not stored and does not remove a property on merge, typed or not (the
    service keeps no nulls); its ``@odata.type`` must still name one of the eight types, as OData
    reads the annotation before the value."""
    if annotation is not None and annotation not in edm.ALL_TYPES:
        raise _invalid()


def typed_value(name: str, value: Any, annotation: str | None) -> Property:
    """Convert one JSON value (with its optional ``@odata.type``) into a typed property."""
    if annotation is None:
        if isinstance(value, _FloatText | float):
            return edm.DOUBLE, _to_double(value)
        if isinstance(value, str):
            return edm.STRING, _check_string(value)
        if isinstance(value, bool):
            return edm.BOOLEAN, value
        if isinstance(value, int):
            if edm.INT32_MIN <= value <= edm.INT32_MAX:
                return edm.INT32, value
            return edm.DOUBLE, _to_double(value)
        raise _invalid()
    if annotation == edm.STRING:
        if not isinstance(value, str) or isinstance(value, _FloatText):
            raise _invalid()
        return edm.STRING, _check_string(value)
    if annotation == edm.BOOLEAN:
        return edm.BOOLEAN, _to_boolean(value)
    if annotation == edm.INT32:
        return edm.INT32, _to_int(value, edm.INT32_MIN, edm.INT32_MAX)
    if annotation == edm.INT64:
        return edm.INT64, _to_int(value, edm.INT64_MIN, edm.INT64_MAX)
    if annotation == edm.DOUBLE:
        return edm.DOUBLE, _to_double(value)
    if annotation == edm.DATETIME:
        return edm.DATETIME, _to_datetime(name, value)
    if annotation == edm.GUID:
        guid = edm.parse_guid(value) if isinstance(value, str) else None
        if guid is None:
            raise _invalid()
        return edm.GUID, guid
    if annotation == edm.BINARY:
        return edm.BINARY, _to_binary(value)
    raise _invalid()


# Names that passed (never a system name): clients send the same few every time.
_CHECKED_NAMES: set[str] = set()
_CHECKED_NAMES_LIMIT = 8192


def check_property_name(name: str) -> None:
    """A property name is a C# identifier of at most 255 characters."""
    if name in _CHECKED_NAMES:
        return
    if not name or not (name[0].isalpha() or name[0] == "_") or not name.isidentifier():
        raise ServiceError("PropertyNameInvalid")
    if len(name) > MAX_NAME_LENGTH:
        raise ServiceError("PropertyNameTooLong")
    if len(_CHECKED_NAMES) < _CHECKED_NAMES_LIMIT and name not in SYSTEM_NAMES:
        _CHECKED_NAMES.add(name)


def _body_key(which: str, values: dict[str, Any], annotations: dict[str, str]) -> str:
    if annotations.get(which, edm.STRING) != edm.STRING:
        raise ServiceError("PropertiesNeedValue")
    return _key_value(which, values)


def _key_value(which: str, values: dict[str, Any]) -> str:
    """A key from the body: a plain JSON string (``_FloatText`` is number text, so not one)."""
    value = values.get(which)
    if type(value) is not str:
        raise _not_a_key(value)
    check_body_key(which, value)
    return value


def _not_a_key(value: Any) -> ServiceError:
    """The refusal of a body key that is no JSON string. A number is a value Azure cannot read
    as the key's string: 400 ``InvalidInput`` (azure-data-tables' test_encoder_create_entity_
    atypical_values, x-ms-version 2019-02-02: ``"RowKey": 1``). A key missing, null or of
    another JSON type keeps ``PropertiesNeedValue`` (those are not recorded)."""
    number = type(value) in (int, float, _FloatText)
    return ServiceError("InvalidInput" if number else "PropertiesNeedValue")


def entity_from_pairs(pairs: Iterable[tuple[str, Any]], url_keys: tuple[str, str] | None = None) -> Entity:
    """Build a validated entity from a body's JSON pairs.

    ``url_keys`` are the keys of the URL (Update, Merge, Upsert): they are authoritative and the
    body's keys, if any, are ignored, as Azurite does. Inserts pass ``None`` and
    must carry both keys in the body.
    """
    values: dict[str, Any] = {}
    annotations: dict[str, str] = {}
    for name, value in pairs:
        if "@" not in name and not name.startswith("odata."):
            if name in values:
                raise ServiceError("DuplicatePropertiesSpecified")
            values[name] = value
        elif name.endswith(ANNOTATION):
            base = name[: -len(ANNOTATION)]
            if "@" in base:
                continue  # an annotation's own annotation ("X@odata.type@odata.type"): ignored
            if base in annotations:
                raise ServiceError("DuplicatePropertiesSpecified")
            if not isinstance(value, str):
                raise _invalid()
            annotations[base] = value
        # else: control information (odata.*) and other instance annotations are ignored, and so
        # are annotations of annotations, which azure-data-tables 12.x adds to every
        # "X@odata.type" member of a dict it is given ("X@odata.type@odata.type": "Edm.String")
    for base in annotations:
        if base not in values and not base.startswith("odata."):
            raise _invalid()
    if url_keys is None:
        pk = _body_key("PartitionKey", values, annotations)
        rk = _body_key("RowKey", values, annotations)
    else:
        pk, rk = url_keys
    system = ("PartitionKey" in values) + ("RowKey" in values) + ("Timestamp" in values)
    if len(values) - system + 3 > MAX_PROPERTIES:
        raise ServiceError("TooManyProperties")
    properties: Properties = {}
    for name, value in values.items():
        if name not in _CHECKED_NAMES:
            if name in SYSTEM_NAMES:
                continue
            check_property_name(name)
        annotation = annotations.get(name)
        if value is None:
            _check_null(annotation)
            continue
        if type(value) is str and (annotation is None or annotation == edm.STRING):
            properties[name] = (edm.STRING, _check_string(value))  # the common case, inline
        else:
            properties[name] = typed_value(name, value, annotation)
    check_entity_size(pk, rk, properties)
    return Entity(pk, rk, properties)


@dataclass(slots=True)
class _Shape:
    """What a body's member names (and the annotations they carry) leave to check per entity.

    Clients send the same few shapes again and again, and everything :func:`entity_from_pairs`
    decides from names alone is decided once per shape here: which members are annotations,
    that every annotation has its property, the property count, each name's validity and the
    keys' declared type. A body of a known shape only has its values checked, in the order the
    full path checks them, so it fails with the error the full path would give.
    """

    annotations: tuple[tuple[str, str], ...]  # (member, the annotation it carried when planned)
    properties: tuple[tuple[str, str | None], ...]  # user properties in body order, with annotation
    keys_are_strings: bool  # body keys, where present, are unannotated or Edm.String


_SHAPES: dict[tuple[str, ...], _Shape] = {}
_SHAPES_LIMIT = 1024
_KEY_NAMES = ("PartitionKey", "RowKey")


def _plan_shape(fields: dict[str, Any]) -> _Shape | None:
    """The shape of an orjson-read body, or ``None`` where a name alone already fails it."""
    names: list[str] = []
    annotation_members: list[tuple[str, str]] = []
    annotations: dict[str, str] = {}
    for name, value in fields.items():
        if "@" not in name and not name.startswith("odata."):
            names.append(name)
        elif name.endswith(ANNOTATION):
            base = name[: -len(ANNOTATION)]
            if "@" in base:
                continue  # an annotation's own annotation: ignored
            if type(value) is not str:
                return None
            annotations[base] = value
            annotation_members.append((name, value))
    named = set(names)
    if any(base not in named and not base.startswith("odata.") for base in annotations):
        return None
    system = len(named & SYSTEM_NAMES)
    if len(names) - system + 3 > MAX_PROPERTIES:
        return None
    properties: list[tuple[str, str | None]] = []
    for name in names:
        if name in SYSTEM_NAMES:
            continue
        try:
            check_property_name(name)
        except ServiceError:
            return None
        properties.append((name, annotations.get(name)))
    keys_are_strings = all(annotations.get(key, edm.STRING) == edm.STRING for key in _KEY_NAMES)
    return _Shape(tuple(annotation_members), tuple(properties), keys_are_strings)


def _shape_of(fields: dict[str, Any], url_keys: tuple[str, str] | None) -> _Shape | None:
    """The cached shape that fits this body exactly, or ``None`` for the full path."""
    names = tuple(fields)
    shape = _SHAPES.get(names)
    if shape is None:
        if len(_SHAPES) >= _SHAPES_LIMIT:
            return None  # a client with endless shapes pays the full path, not planning on top
        shape = _plan_shape(fields)
        if shape is None:
            return None
        _SHAPES[names] = shape
    for member, annotation in shape.annotations:
        if fields[member] != annotation:
            return None
    if url_keys is None and not shape.keys_are_strings:
        return None
    return shape


def _entity_by_shape(fields: dict[str, Any], shape: _Shape, url_keys: tuple[str, str] | None) -> Entity:
    """:func:`entity_from_pairs` for a body whose names were checked when its shape was planned."""
    if url_keys is None:
        pk = fields.get("PartitionKey")
        rk = fields.get("RowKey")
        if type(pk) is not str:
            raise _not_a_key(pk)
        check_body_key("PartitionKey", pk)
        if type(rk) is not str:
            raise _not_a_key(rk)
        check_body_key("RowKey", rk)
    else:
        pk, rk = url_keys
    properties: Properties = {}
    for name, annotation in shape.properties:
        value = fields[name]
        kind = type(value)
        # The values JSON types alone decide, inline. orjson never yields a lone surrogate or an
        # infinite float, so a string this short and a float need no further check.
        if kind is str:
            if annotation is None or annotation == edm.STRING:
                if len(value) > _SURELY_SHORT:
                    _check_string(value)
                properties[name] = (edm.STRING, value)
                continue
        elif annotation is None:
            if kind is int:
                if edm.INT32_MIN <= value <= edm.INT32_MAX:
                    properties[name] = (edm.INT32, value)
                    continue
            elif kind is float:
                properties[name] = (edm.DOUBLE, value)
                continue
            elif kind is bool:
                properties[name] = (edm.BOOLEAN, value)
                continue
        if value is None:
            _check_null(annotation)
            continue
        properties[name] = typed_value(name, value, annotation)
    check_entity_size(pk, rk, properties)
    return Entity(pk, rk, properties)


# A string of at most this many characters has at most twice as many UTF-16 code units, so it is
# within the limit whatever its characters.
_SURELY_SHORT = MAX_STRING_UTF16 // 2


def entity_size(pk: str, rk: str, properties: Properties) -> int:
    """The service's documented entity size formula ("Understanding the Table service data model")."""
    size = 4 + 2 * edm.utf16_length(pk) + 2 * edm.utf16_length(rk)
    for name, (kind, value) in properties.items():
        size += 8 + 2 * len(name)
        if kind == edm.STRING:
            size += 4 + 2 * edm.utf16_length(value)
        elif kind == edm.BINARY:
            size += 4 + len(value)
        else:
            size += _FIXED_SIZES[kind]
    return size


def check_entity_size(pk: str, rk: str, properties: Properties) -> None:
    """Reject entities over 1 MiB; cheap unless the entity could be near the limit."""
    if len(properties) * (8 + 2 * MAX_NAME_LENGTH + 4 + 2 * MAX_STRING_UTF16) < MAX_ENTITY_BYTES - 8192:
        return
    if entity_size(pk, rk, properties) > MAX_ENTITY_BYTES:
        raise ServiceError("EntityTooLarge")


def check_merged(pk: str, rk: str, properties: Properties) -> None:
    """Limits that apply to the result of a merge, not only to the request."""
    if len(properties) + 3 > MAX_PROPERTIES:
        raise ServiceError("TooManyProperties")
    check_entity_size(pk, rk, properties)


def _format_double(value: float) -> str | float:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def wire_properties(properties: Properties) -> dict[str, Any]:
    """User properties in minimal-metadata JSON form: annotations only where JSON is ambiguous."""
    out: dict[str, Any] = {}
    for name, (kind, value) in properties.items():
        if kind in (edm.STRING, edm.BOOLEAN, edm.INT32):
            out[name] = value
        elif kind == edm.DOUBLE:
            if math.isfinite(value):
                out[name] = value
            else:
                out[name + ANNOTATION] = edm.DOUBLE
                out[name] = _format_double(value)
        elif kind == edm.INT64:
            out[name + ANNOTATION] = edm.INT64
            out[name] = str(value)
        elif kind == edm.DATETIME:
            out[name + ANNOTATION] = edm.DATETIME
            out[name] = edm.format_datetime(value)
        elif kind == edm.GUID:
            out[name + ANNOTATION] = edm.GUID
            out[name] = value
        else:
            out[name + ANNOTATION] = edm.BINARY
            out[name] = base64.b64encode(value).decode("ascii")
    return out


def encode_properties(properties: Properties) -> bytes:
    """The stored form: compact minimal-metadata JSON of the user properties."""
    return orjson.dumps(wire_properties(properties))


def decode_properties(blob: bytes, only: frozenset[str] | None = None) -> Properties:
    """Inverse of :func:`encode_properties` (the input is trusted: we wrote it).

    ``only`` limits decoding to the named properties: a query's residual filter needs just the
    few it references, and skipping the rest (base64, dates) is most of a scan's cost.
    """
    raw: dict[str, Any] = orjson.loads(blob)
    properties: Properties = {}
    items = raw.items() if only is None else [(n, raw[n]) for n in only if n in raw]
    for name, value in items:
        if name.endswith(ANNOTATION):
            continue
        annotation = raw.get(name + ANNOTATION)
        if annotation is None:
            if isinstance(value, str):
                properties[name] = (edm.STRING, value)
            elif isinstance(value, bool):
                properties[name] = (edm.BOOLEAN, value)
            elif isinstance(value, int):
                properties[name] = (edm.INT32, value)
            else:
                properties[name] = (edm.DOUBLE, float(value))
        elif annotation == edm.INT64:
            properties[name] = (edm.INT64, int(value))
        elif annotation == edm.DOUBLE:
            properties[name] = (edm.DOUBLE, _SPECIAL_DOUBLES.get(value, value))
        elif annotation == edm.DATETIME:
            properties[name] = (edm.DATETIME, edm.parse_datetime(value))
        elif annotation == edm.GUID:
            properties[name] = (edm.GUID, value)
        else:
            properties[name] = (edm.BINARY, base64.b64decode(value))
    return properties
