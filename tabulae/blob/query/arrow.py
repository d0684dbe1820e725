"""Arrow output (``ArrowConfiguration``): the result as an Arrow IPC stream, written by pyarrow
when it is installed (not a runtime dependency; without it the request is refused up front).

Azure's stream, as recorded: the schema, an empty record batch, then the rows' batches, with no
end-of-stream marker; a DECIMAL field takes an integer as its unscaled value (400 with scale 2
is 4.00). Each piece of result data carries the batches written since the last one.
"""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from tabulae.blob.query.evaluate import MISSING, cast, conversion_error

FieldSpec = tuple[str, str, int | None, int | None]  # type, name, precision, scale
TYPES = frozenset({"int64", "bool", "timestamp[ms]", "string", "double", "decimal"})


def available() -> bool:
    return importlib.util.find_spec("pyarrow") is not None


class ArrowStream:
    """The IPC stream of one answer, written a batch per piece of result data."""

    def __init__(self, fields: Sequence[FieldSpec]) -> None:
        import pyarrow as pa
        import pyarrow.ipc as ipc

        self.pa = pa
        self.fields = list(fields)
        self.schema = pa.schema(
            [
                pa.field(name or f"_{i}", self._type(kind, precision, scale))
                for i, (kind, name, precision, scale) in enumerate(fields, 1)
            ]
        )
        self.sink = io.BytesIO()
        self.writer = ipc.new_stream(self.sink, self.schema)
        self.writer.write_batch(self.pa.record_batch([[] for _ in fields], schema=self.schema))

    def _type(self, kind: str, precision: int | None, scale: int | None) -> Any:
        pa = self.pa
        if kind == "decimal":
            return pa.decimal128(precision or 38, scale or 0)
        return {"int64": pa.int64(), "bool": pa.bool_(), "timestamp[ms]": pa.timestamp("ms"),
                "string": pa.string(), "double": pa.float64()}[kind]  # fmt: skip

    def _value(self, spec: FieldSpec, value: Any) -> Any:
        if value is None or value is MISSING:
            return None
        kind, _, _, scale = spec
        if kind == "int64":
            return cast(value, "INT")
        if kind == "double":
            return cast(value, "FLOAT")
        if kind == "bool":
            return cast(value, "BOOLEAN")
        if kind == "string":
            return cast(value, "STRING")
        if kind == "timestamp[ms]":
            return cast(value, "TIMESTAMP").replace(tzinfo=None)
        try:
            number = Decimal(str(value).strip())
        except InvalidOperation:
            raise conversion_error() from None
        if number == number.to_integral_value() and "." not in str(value):
            return number.scaleb(-(scale or 0))
        return number.quantize(Decimal(1).scaleb(-(scale or 0)))

    def piece(self, rows: Sequence[Sequence[Any]]) -> bytes:
        """The bytes written since the last piece, with ``rows`` as one more batch."""
        if rows:
            columns = [[self._value(spec, row[i] if i < len(row) else None) for row in rows]
                       for i, spec in enumerate(self.fields)]  # fmt: skip
            self.writer.write_batch(self.pa.record_batch(columns, schema=self.schema))
        data = self.sink.getvalue()
        self.sink.seek(0)
        self.sink.truncate()
        return data
