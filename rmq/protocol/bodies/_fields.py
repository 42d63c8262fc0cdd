"""Reading the fields of a parsed JSON body the way every peer writes them.

Java's fastjson, Go's and C++'s clients do not agree on types: numbers come as JSON numbers
or as strings, booleans as `true` or `"true"`, and absent fields mean the Java default. These
helpers take each such form and raise BodyError, naming the field, on anything else.
"""

from __future__ import annotations

from typing import Any

from ..errors import BodyError


def obj(value: Any, what: str) -> dict[Any, Any]:
    """A JSON object."""
    if not isinstance(value, dict):
        raise BodyError(f"{what} is not a JSON object: {_show(value)}")
    return value


def table(value: Any, what: str) -> dict[Any, Any]:
    """A JSON object that may be absent or null (then empty)."""
    return {} if value is None else obj(value, what)


def array(value: Any, what: str) -> list[Any]:
    """A JSON array (Java writes sets as arrays) that may be absent or null (then empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise BodyError(f"bad {what}: expected a JSON array, got {_show(value)}")
    return value


def integer(value: Any, what: str) -> int:
    """A number, or a string holding one (C++ and Go send some numbers as strings)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise BodyError(f"{what} must be an integer, got {_show(value)}")


def number(value: Any, what: str) -> float:
    """A JSON number, or a string holding one."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise BodyError(f"{what} must be a number, got {_show(value)}")


def flag(value: Any, what: str) -> bool:
    """`true` or `false`, or those words as a string (any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise BodyError(f"{what} must be true or false, got {_show(value)}")


def text(value: Any, what: str) -> str:
    """A string; a number or boolean is taken as its JSON text."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    raise BodyError(f"{what} must be a string, got {_show(value)}")


def strings(value: Any, what: str) -> list[str]:
    """A JSON array of strings, absent or null meaning none."""
    items = array(value, what)
    if not all(isinstance(item, str) for item in items):
        raise BodyError(f"{what} is not a list of strings: {_show(value)}")
    return items


def _show(value: Any) -> str:
    return f"{value!r:.80}"
