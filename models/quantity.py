"""Kubernetes `resource.Quantity` and `intstr.IntOrString` arithmetic, in pure Python.

Parsing and the canonical string follow apimachinery exactly: DecimalSI (`1500m`, `12k`),
BinarySI (`1Gi`) and DecimalExponent (`1e3`) formats; values below a nano round up (away
from zero); BinarySI values are capped at 2^63-1; the canonical form keeps no fractional
digits and picks the largest suffix that does (`"1.5"` -> `"1500m"`, `"1024Mi"` -> `"1Gi"`),
falling back to exponent notation past `E`/`Ei` or below `n`.

Public API:
- `Quantity.parse(text) -> Quantity` (raises `QuantityError`), `str(quantity)` /
  `quantity.canonical()`, `Quantity.from_parts(mantissa, exponent, format)`, comparisons,
  `.amount` (exact `Decimal`), `.sign()`, `.value()` (rounded up, like `Quantity.Value()`)
- `canonical_quantity(text) -> str`
- `QuantityText`: pydantic string type that must parse as a quantity (JSON numbers accepted,
  as the API server does); the string is kept as written.
- `scaled_value_from_int_or_percent(value, total, round_up) -> int`: Kubernetes'
  `intstr.GetScaledValueFromIntOrPercent` (surge rounds up, unavailable down).
- `surge_count(value, total)` (rounds up), `unavailable_count(value, total)` (rounds down),
  `resolve_fenceposts(max_surge, max_unavailable, desired) -> (surge, unavailable)`,
  `canary_step_instances(capacity, desired)` (a canary step's new Instances, rounded up)
- `is_percent(value)`, `parse_percent(value) -> int`
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_UP, Decimal, localcontext
from functools import total_ordering
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError

QuantityFormat = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}
_DECIMAL_SUFFIX_BY_EXPONENT = {exponent: suffix for suffix, exponent in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_SUFFIX_BY_POWER = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_EXPONENT_SUFFIX = re.compile(r"[eE]([-+]?[0-9]+)")
_MAX_INT32 = 2**31 - 1
# BinarySI amounts are capped here, as apimachinery's maxAllowed.
_MAX_ALLOWED = Decimal(2**63 - 1)
_NANO = Decimal((0, (1,), -9))
_PRECISION = 10_000  # digits kept by Decimal arithmetic: exact for anything a manifest holds

QUANTITY_FORMS = '"3", "1.5", "500m", "1Gi" or "1e3"'


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity; the message names the text and the forms."""


@total_ordering
@dataclass(frozen=True)
class Quantity:
    """An exact quantity and the format it prints in."""

    amount: Decimal
    format: QuantityFormat = "DecimalSI"

    @classmethod
    def from_parts(cls, mantissa: int, exponent: int, format: QuantityFormat) -> Quantity:
        """`mantissa * 10**exponent`, as apimachinery's test helper `decQuantity` builds it."""
        sign = 1 if mantissa < 0 else 0
        digits = tuple(int(d) for d in str(abs(mantissa)))
        return cls(Decimal((sign, digits, exponent)), format)

    @classmethod
    def parse(cls, text: str) -> Quantity:
        return _parse(text)

    def sign(self) -> int:
        return 0 if self.amount.is_zero() else (1 if self.amount > 0 else -1)

    def is_zero(self) -> bool:
        return self.amount.is_zero()

    def value(self) -> int:
        """The amount rounded up to an integer, as `Quantity.Value()`."""
        with localcontext() as context:
            context.prec = _PRECISION
            return int(self.amount.to_integral_value(rounding=ROUND_CEILING))

    def canonical(self) -> str:
        return _canonical(self)

    def __str__(self) -> str:
        return _canonical(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.amount == other.amount

    def __lt__(self, other: Quantity) -> bool:
        return self.amount < other.amount

    def __hash__(self) -> int:
        return hash(self.amount)


def _parse(text: str) -> Quantity:
    if not isinstance(text, str) or not text:
        raise QuantityError(f"{text!r} is not a quantity (use forms like {QUANTITY_FORMS})")
    if text == "0":
        return Quantity(Decimal(0), "DecimalSI")
    match = re.fullmatch(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)", text, flags=re.DOTALL)
    # Like apimachinery, an empty number reads as 0 ("." and "-." parse); a bad suffix doesn't.
    if match is None:
        raise QuantityError(f"{text!r} is not a quantity (use forms like {QUANTITY_FORMS})")
    sign_text, whole, fraction, suffix = match.groups()
    fraction = fraction or ""
    base, exponent, format = _interpret_suffix(text, suffix)
    digits = (whole + fraction).lstrip("0") or "0"
    with localcontext() as context:
        context.prec = _PRECISION
        amount = Decimal((0, tuple(int(d) for d in digits), -len(fraction)))
        if base == 10:
            amount = amount.scaleb(exponent)
        else:
            amount = amount * (2**exponent)
        # Anything finer than a nano rounds up so a request for "some" never becomes none.
        if not amount.is_zero() and amount.as_tuple().exponent < -9:  # type: ignore[operator]
            amount = amount.quantize(_NANO, rounding=ROUND_UP)
        if format == "BinarySI" and amount > _MAX_ALLOWED:
            amount = _MAX_ALLOWED
        if format == "BinarySI" and 0 < amount < 1:
            format = "DecimalSI"
        if sign_text == "-" and not amount.is_zero():
            amount = -amount
    return Quantity(amount, format)


def _interpret_suffix(text: str, suffix: str) -> tuple[int, int, QuantityFormat]:
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], "DecimalSI"
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], "BinarySI"
    exponent_match = _EXPONENT_SUFFIX.fullmatch(suffix)
    if exponent_match is not None:
        exponent = int(exponent_match.group(1))
        # An exponent outside int32 would wrap in Go; apimachinery refuses it instead.
        if abs(exponent) <= _MAX_INT32:
            return 10, exponent, "DecimalExponent"
    raise QuantityError(
        f"{text!r} is not a quantity: unknown suffix {suffix!r} "
        f"(use n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent such as e3)"
    )


def _canonical(quantity: Quantity) -> str:
    amount = quantity.amount
    if amount.is_zero():
        return "0"
    format = quantity.format
    if format == "BinarySI":
        if -1024 < amount < 1024 or amount != amount.to_integral_value(rounding=ROUND_UP):
            # Below 1024, or with a fraction, BinarySI would round: print it decimal instead.
            format = "DecimalSI"
        else:
            return _binary_text(int(amount))
    return _decimal_text(amount, format)


def _decimal_text(amount: Decimal, format: QuantityFormat) -> str:
    sign, digit_tuple, exponent = amount.as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(str(d) for d in digit_tuple).rstrip("0") or "0"
    exponent += len(digit_tuple) - len(digits)
    # Lower the exponent to a multiple of three, so it maps onto an SI suffix.
    shift = exponent % 3
    digits += "0" * shift
    exponent -= shift
    prefix = "-" if sign else ""
    if format == "DecimalSI" and exponent in _DECIMAL_SUFFIX_BY_EXPONENT:
        return prefix + digits + _DECIMAL_SUFFIX_BY_EXPONENT[exponent]
    # DecimalExponent, or a DecimalSI value past "E" or below "n".
    return prefix + digits + (f"e{exponent}" if exponent else "")


def _binary_text(value: int) -> str:
    magnitude = abs(value)
    power = 0
    while magnitude % 1024 == 0:
        magnitude //= 1024
        power += 1
    if power < len(_BINARY_SUFFIX_BY_POWER):
        return ("-" if value < 0 else "") + str(magnitude) + _BINARY_SUFFIX_BY_POWER[power]
    # No suffix past Ei: an exact decimal form keeps the magnitude.
    return _decimal_text(Decimal(value), "DecimalExponent")


def canonical_quantity(text: str) -> str:
    """The canonical form of a quantity string (`"1.5"` -> `"1500m"`)."""
    return str(Quantity.parse(text))


def _coerce_quantity_text(value: Any) -> Any:
    # The API server accepts a JSON number where a quantity is expected; YAML users write 3.
    if isinstance(value, bool):
        raise PydanticCustomError("invalid_quantity", "{value!r} is not a quantity", {"value": value})
    if isinstance(value, int | float):
        value = repr(value) if isinstance(value, float) else str(value)
    if not isinstance(value, str):
        raise PydanticCustomError(
            "invalid_quantity", "{value!r} is not a quantity (use forms like {forms})",
            {"value": value, "forms": QUANTITY_FORMS},
        )
    try:
        Quantity.parse(value)
    except QuantityError as error:
        raise PydanticCustomError("invalid_quantity", "{detail}", {"detail": str(error)}) from None
    return value


QuantityText = Annotated[str, BeforeValidator(_coerce_quantity_text)]
"""A quantity kept as the user wrote it; `Quantity.parse` gives its value."""


def is_percent(value: int | str) -> bool:
    return isinstance(value, str) and value.endswith("%")


def parse_percent(value: str) -> int:
    """The whole number in `"25%"`; `ValueError` naming the value otherwise."""
    if not value.endswith("%"):
        raise ValueError(f"invalid type: string {value!r} is not a percentage")
    number = value[:-1]
    if not re.fullmatch(r"[+-]?[0-9]+", number):
        raise ValueError(f"invalid value for IntOrString: invalid value {value!r}")
    return int(number)


def scaled_value_from_int_or_percent(value: int | str, total: int, round_up: bool) -> int:
    """Kubernetes' `GetScaledValueFromIntOrPercent`: an int as is, a percentage of `total`.

    Kubernetes computes in float64; so do we, so results agree to the last case.
    """
    if isinstance(value, bool):
        raise ValueError(f"invalid type: {value!r} is neither int nor percentage")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        percent = parse_percent(value)
        scaled = float(percent) * float(total) / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    raise ValueError(f"invalid type: {value!r} is neither int nor percentage")


def surge_count(max_surge: int | str, total: int) -> int:
    """Instances a surge budget allows above `total`: a percentage rounds up, as Kubernetes'."""
    return scaled_value_from_int_or_percent(max_surge, total, round_up=True)


def unavailable_count(max_unavailable: int | str, total: int) -> int:
    """Instances an unavailability budget allows out of `total`: a percentage rounds down."""
    return scaled_value_from_int_or_percent(max_unavailable, total, round_up=False)


def resolve_fenceposts(max_surge: int | str, max_unavailable: int | str, desired: int) -> tuple[int, int]:
    """Kubernetes' `ResolveFenceposts`: (surge, unavailable), with 1 unavailable when both are 0
    so that a rollout can always make progress."""
    surge = surge_count(max_surge, desired)
    unavailable = unavailable_count(max_unavailable, desired)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def canary_step_instances(capacity: int | str, desired: int) -> int:
    """New-revision Instances at a canary step (reference §1.3): a percentage of `desired`
    rounded up, or the count capped at `desired`."""
    if isinstance(capacity, str):
        return min(scaled_value_from_int_or_percent(capacity, desired, round_up=True), desired)
    return min(capacity, desired)
