"""A small JSON Schema subset checker for request bodies and query strings.

The engine validates meaning (key syntax, limits, enums); this layer only guarantees that what reaches
it has the declared shape, so a wrong JSON type or an unknown field is a clear 400 and never a crash.
Supported keywords: type (string or list, with "null"), enum, minLength, maxLength, minimum, maximum,
properties, required, additionalProperties (false), items.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import InvalidArgument

# ASCII digits only (\d would take other scripts' digits, which int() accepts); 19 digits reach 2^63 - 1,
# and the schema's minimum/maximum then bound the value.
_INT = re.compile(r"-?[0-9]{1,19}")


def json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _type_ok(value: object, wanted: str) -> bool:
    actual = json_type(value)
    return actual == wanted or (wanted == "number" and actual == "integer")


def check(value: Any, schema: dict[str, Any], where: str) -> None:
    """Raise InvalidArgument naming ``where`` when ``value`` does not fit ``schema``."""
    types = schema.get("type")
    if types is not None:
        wanted = [types] if isinstance(types, str) else list(types)
        if not any(_type_ok(value, t) for t in wanted):
            raise InvalidArgument(f"{where} must be {' or '.join(wanted)}, got {json_type(value)}")
    if value is None:
        return
    if "enum" in schema and value not in schema["enum"]:
        raise InvalidArgument(f"{where} must be one of {', '.join(map(str, schema['enum']))}, got {value!r}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            raise InvalidArgument(
                f"{where} must not be empty"
                if schema["minLength"] == 1
                else f"{where} is shorter than {schema['minLength']} characters"
            )
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            raise InvalidArgument(f"{where} is longer than {schema['maxLength']} characters")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise InvalidArgument(f"{where} must be >= {schema['minimum']}, got {value}")
        if "maximum" in schema and value > schema["maximum"]:
            raise InvalidArgument(f"{where} must be <= {schema['maximum']}, got {value}")
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            check(item, schema["items"], f"{where}[{i}]")
    elif isinstance(value, dict):
        props: dict[str, Any] = schema.get("properties", {})
        if schema.get("additionalProperties") is False:
            unknown = sorted(set(value) - set(props))
            if unknown:
                raise InvalidArgument(
                    f"{where}: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(props)) or 'none'}"
                )
        for name in schema.get("required", ()):
            if value.get(name) is None:
                raise InvalidArgument(f"{where}: missing required field {name!r}")
        for name, sub in props.items():
            if name in value:
                check(value[name], sub, f"{name}" if where == "request body" else f"{where}.{name}")


def query_value(raw: str, schema: dict[str, Any], name: str) -> Any:
    """Convert one query-string value by its schema type, then check it."""
    kind = schema.get("type")
    value: Any = raw
    if kind == "integer":
        if not _INT.fullmatch(raw):
            raise InvalidArgument(f"query parameter {name} must be an integer, got {raw!r}")
        value = int(raw)
    elif kind == "boolean":
        if raw not in ("true", "false"):
            raise InvalidArgument(f"query parameter {name} must be true or false, got {raw!r}")
        value = raw == "true"
    check(value, schema, f"query parameter {name}")
    return value
