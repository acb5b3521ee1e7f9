"""Go duration strings (`30m`, `1h30m`, `500ms`), as Kubernetes and OME write them.

Public API:
- `parse_duration(text) -> float`: seconds, exactly as Go's `time.ParseDuration` reads the
  text; raises `ValueError` naming the text and the accepted forms.
- `format_duration(seconds) -> str`: Go's `Duration.String()` (`600.0` -> `"10m0s"`), used in
  messages such as `waiting out the 10m0s soak`.
- `Duration`: a pydantic string type validated with `parse_duration`; its validation error
  has type `invalid_duration`, which admission reports as `InvalidDuration`.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

# Nanoseconds per unit, as in Go's time package (both micro signs are accepted there).
_UNIT_NANOSECONDS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,
    "\u03bcs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}

_TERM = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")

DURATION_FORMS = 'forms like "30s", "5m", "1h30m"'


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string; `ValueError` when Go would refuse it too."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"{text!r} is not a duration (use {DURATION_FORMS})")
    body = text
    sign = 1
    if body[0] in "+-":
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    # Go accepts a bare zero without a unit, and nothing else without one.
    if body == "0":
        return 0.0
    position = 0
    total = Decimal(0)
    while position < len(body):
        match = _TERM.match(body, position)
        if match is None:
            raise ValueError(f"{text!r} is not a duration (use {DURATION_FORMS})")
        number, unit = match.groups()
        total += Decimal(number) * _UNIT_NANOSECONDS[unit]
        position = match.end()
    if position == 0:
        raise ValueError(f"{text!r} is not a duration (use {DURATION_FORMS})")
    return sign * float(total / Decimal(1_000_000_000))


def format_duration(seconds: float) -> str:
    """Go's `Duration.String()`: `1h0m0s`, `10m0s`, `1.5s`, `500ms`, `0s`."""
    nanoseconds = round(seconds * 1_000_000_000)
    if nanoseconds == 0:
        return "0s"
    sign = "-" if nanoseconds < 0 else ""
    nanoseconds = abs(nanoseconds)
    if nanoseconds < 1_000_000_000:
        # Below a second Go picks the largest unit that keeps an integer part.
        for unit, size in (("ms", 1_000_000), ("\u00b5s", 1_000), ("ns", 1)):
            if nanoseconds >= size:
                return sign + _decimal_text(nanoseconds, size) + unit
    hours, rest = divmod(nanoseconds, 3600 * 1_000_000_000)
    minutes, rest = divmod(rest, 60 * 1_000_000_000)
    text = _decimal_text(rest, 1_000_000_000) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{text}"
    if minutes:
        return f"{sign}{minutes}m{text}"
    return sign + text


def _decimal_text(amount: int, unit: int) -> str:
    whole, fraction = divmod(amount, unit)
    if not fraction:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{str(fraction).rjust(digits, '0').rstrip('0')}"


def _validate_duration(value: str) -> str:
    try:
        parse_duration(value)
    except ValueError as error:
        raise PydanticCustomError("invalid_duration", "{detail}", {"detail": str(error)}) from None
    return value


Duration = Annotated[str, AfterValidator(_validate_duration)]
"""A Go duration string, kept as the user wrote it."""
