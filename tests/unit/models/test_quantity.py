"""Quantity parsing and canonical form, against apimachinery's own test vectors.

The rows of `PARSE_ROWS`, `STRING_ROWS`, `PARSE_EMIT_ROWS` and `INVALID` restate the tables
of `TestQuantityParse`, `TestQuantityString`, `TestQuantityParseEmit` and
`TestQuantityStringBelowNano` in apimachinery's `quantity_test.go` as rows of our own:
(input, mantissa, exponent, format) where the Go test writes `decQuantity(m, e, format)`.
"""

from __future__ import annotations

import pytest

from models.quantity import (
    Quantity,
    QuantityError,
    canonical_quantity,
    scaled_value_from_int_or_percent,
)

pytestmark = pytest.mark.unit

MAX_ALLOWED = 2**63 - 1

PARSE_ROWS: list[tuple[str, int, int, str]] = [
    ("0", 0, 0, "DecimalSI"),
    ("0n", 0, 0, "DecimalSI"),
    ("0u", 0, 0, "DecimalSI"),
    ("0m", 0, 0, "DecimalSI"),
    ("0Ki", 0, 0, "BinarySI"),
    ("0k", 0, 0, "DecimalSI"),
    ("0Mi", 0, 0, "BinarySI"),
    ("0M", 0, 0, "DecimalSI"),
    ("0Gi", 0, 0, "BinarySI"),
    ("0G", 0, 0, "DecimalSI"),
    ("0Ti", 0, 0, "BinarySI"),
    ("0T", 0, 0, "DecimalSI"),
    ("1", 1, 0, "DecimalSI"),
    ("1Ki", 1024, 0, "BinarySI"),
    ("8Ki", 8 * 1024, 0, "BinarySI"),
    ("7Mi", 7 * 1024**2, 0, "BinarySI"),
    ("6Gi", 6 * 1024**3, 0, "BinarySI"),
    ("5Ti", 5 * 1024**4, 0, "BinarySI"),
    ("4Pi", 4 * 1024**5, 0, "BinarySI"),
    ("3Ei", 3 * 1024**6, 0, "BinarySI"),
    ("10Ti", 10 * 1024**4, 0, "BinarySI"),
    ("100Ti", 100 * 1024**4, 0, "BinarySI"),
    ("5n", 5, -9, "DecimalSI"),
    ("4u", 4, -6, "DecimalSI"),
    ("3m", 3, -3, "DecimalSI"),
    ("9", 9, 0, "DecimalSI"),
    ("8k", 8, 3, "DecimalSI"),
    ("50k", 5, 4, "DecimalSI"),
    ("7M", 7, 6, "DecimalSI"),
    ("6G", 6, 9, "DecimalSI"),
    ("5T", 5, 12, "DecimalSI"),
    ("40T", 4, 13, "DecimalSI"),
    ("300T", 3, 14, "DecimalSI"),
    ("2P", 2, 15, "DecimalSI"),
    ("1E", 1, 18, "DecimalSI"),
    ("1E-3", 1, -3, "DecimalExponent"),
    ("1e3", 1, 3, "DecimalExponent"),
    ("1E6", 1, 6, "DecimalExponent"),
    ("1e9", 1, 9, "DecimalExponent"),
    ("1E12", 1, 12, "DecimalExponent"),
    ("1e15", 1, 15, "DecimalExponent"),
    ("1E18", 1, 18, "DecimalExponent"),
    ("1e14", 1, 14, "DecimalExponent"),
    ("1e13", 1, 13, "DecimalExponent"),
    ("100.035k", 100035, 0, "DecimalSI"),
    ("0.001", 1, -3, "DecimalSI"),
    ("0.0005k", 5, -1, "DecimalSI"),
    ("0.005", 5, -3, "DecimalSI"),
    ("0.05", 5, -2, "DecimalSI"),
    ("0.5", 5, -1, "DecimalSI"),
    ("0.00050k", 5, -1, "DecimalSI"),
    ("0.00500", 5, -3, "DecimalSI"),
    ("0.05000", 5, -2, "DecimalSI"),
    ("0.50000", 5, -1, "DecimalSI"),
    ("0.5e0", 5, -1, "DecimalExponent"),
    ("0.5e-1", 5, -2, "DecimalExponent"),
    ("0.5e-2", 5, -3, "DecimalExponent"),
    ("10.035M", 10035, 3, "DecimalSI"),
    ("1.2e3", 12, 2, "DecimalExponent"),
    ("1.3E+6", 13, 5, "DecimalExponent"),
    ("1.40e9", 14, 8, "DecimalExponent"),
    ("1.53E12", 153, 10, "DecimalExponent"),
    ("1.6e15", 16, 14, "DecimalExponent"),
    ("1.7E18", 17, 17, "DecimalExponent"),
    ("9.01", 901, -2, "DecimalSI"),
    ("8.1k", 81, 2, "DecimalSI"),
    ("7.123456M", 7123456, 0, "DecimalSI"),
    ("6.987654321G", 6987654321, 0, "DecimalSI"),
    ("5.444T", 5444, 9, "DecimalSI"),
    ("40.1T", 401, 11, "DecimalSI"),
    ("300.2T", 3002, 11, "DecimalSI"),
    ("2.5P", 25, 14, "DecimalSI"),
    ("1.01E", 101, 16, "DecimalSI"),
    # Values finer than a nano round up (away from zero).
    ("3.001n", 4, -9, "DecimalSI"),
    ("1.1E-9", 2, -9, "DecimalExponent"),
    ("0.0000000001", 1, -9, "DecimalSI"),
    ("0.0000000005", 1, -9, "DecimalSI"),
    ("0.00000000050", 1, -9, "DecimalSI"),
    ("0.5e-9", 1, -9, "DecimalExponent"),
    ("0.9n", 1, -9, "DecimalSI"),
    ("0.00000012345", 124, -9, "DecimalSI"),
    ("0.00000012354", 124, -9, "DecimalSI"),
    # BinarySI saturates at 2^63-1.
    ("9Ei", MAX_ALLOWED, 0, "BinarySI"),
    ("9223372036854775807Ki", MAX_ALLOWED, 0, "BinarySI"),
    ("12E", 12, 18, "DecimalSI"),
    ("100.035Ki", 10243584, -2, "BinarySI"),
    ("0.5Mi", 512 * 1024, 0, "BinarySI"),
    ("0.05Gi", 536870912, -1, "BinarySI"),
    ("0.025Ti", 274877906944, -1, "BinarySI"),
    # Rounds up to 2n and, being below 1, changes format.
    ("0.000000000001Ki", 2, -9, "DecimalSI"),
    (".001", 1, -3, "DecimalSI"),
    (".0001k", 100, -3, "DecimalSI"),
    ("1.", 1, 0, "DecimalSI"),
    ("1.G", 1, 9, "DecimalSI"),
]


@pytest.mark.parametrize(("text", "mantissa", "exponent", "format"), PARSE_ROWS, ids=[r[0] for r in PARSE_ROWS])
@pytest.mark.parametrize("sign", ["", "+", "-"])
def test_parse(text: str, mantissa: int, exponent: int, format: str, sign: str) -> None:
    parsed = Quantity.parse(sign + text)
    expected = Quantity.from_parts(-mantissa if sign == "-" else mantissa, exponent, "DecimalSI")
    assert parsed.amount == expected.amount
    assert parsed.format == format


STRING_ROWS: list[tuple[int, int, str, str, str]] = [
    # (mantissa, exponent, format, canonical, an alternate spelling with the same canonical)
    (1024**3, 0, "BinarySI", "1Gi", "1024Mi"),
    (300 * 1024**2, 0, "BinarySI", "300Mi", "307200Ki"),
    (6 * 1024, 0, "BinarySI", "6Ki", ""),
    (1001 * 1024**3, 0, "BinarySI", "1001Gi", "1025024Mi"),
    (1024**4, 0, "BinarySI", "1Ti", "1024Gi"),
    (5, 0, "BinarySI", "5", "5000m"),
    (500, -3, "BinarySI", "500m", "0.5"),
    (1, 9, "DecimalSI", "1G", "1000M"),
    (1000, 6, "DecimalSI", "1G", "0.001T"),
    (1000000, 3, "DecimalSI", "1G", ""),
    (1000000000, 0, "DecimalSI", "1G", ""),
    (1, -3, "DecimalSI", "1m", "1000u"),
    (80, -3, "DecimalSI", "80m", ""),
    (1080, -3, "DecimalSI", "1080m", "1.08"),
    (108, -2, "DecimalSI", "1080m", "1080000000n"),
    (10800, -4, "DecimalSI", "1080m", ""),
    (300, 6, "DecimalSI", "300M", ""),
    (1, 12, "DecimalSI", "1T", ""),
    (1, 18, "DecimalSI", "1E", ""),
    (1, 21, "DecimalSI", "1e21", "1000E"),
    (5, 21, "DecimalSI", "5e21", "5000E"),
    (1, 24, "DecimalSI", "1e24", "1000000E"),
    (1, 70, "BinarySI", "10e69", ""),
    (2, 70, "BinarySI", "20e69", ""),
    (1, 72, "BinarySI", "1e72", ""),
    (1234567, 6, "DecimalSI", "1234567M", ""),
    (1234567, -3, "BinarySI", "1234567m", ""),
    (3, 3, "DecimalSI", "3k", ""),
    (1025, 0, "BinarySI", "1025", ""),
    (0, 0, "DecimalSI", "0", ""),
    (0, 0, "BinarySI", "0", ""),
    (1, 9, "DecimalExponent", "1e9", ".001e12"),
    (1, -3, "DecimalExponent", "1e-3", "0.001e0"),
    (1, -9, "DecimalExponent", "1e-9", "1000e-12"),
    (80, -3, "DecimalExponent", "80e-3", ""),
    (300, 6, "DecimalExponent", "300e6", ""),
    (1, 12, "DecimalExponent", "1e12", ""),
    (1, 3, "DecimalExponent", "1e3", ""),
    (3, 3, "DecimalExponent", "3e3", ""),
    (0, 0, "DecimalExponent", "0", "00"),
    (1, -9, "DecimalSI", "1n", ""),
    (80, -9, "DecimalSI", "80n", ""),
    (1080, -9, "DecimalSI", "1080n", ""),
    (108, -8, "DecimalSI", "1080n", ""),
    (10800, -10, "DecimalSI", "1080n", ""),
    (1, -6, "DecimalSI", "1u", ""),
    (80, -6, "DecimalSI", "80u", ""),
    (1080, -6, "DecimalSI", "1080u", ""),
    # TestQuantityStringBelowNano: no suffix below n, exponent notation instead.
    (1, -12, "DecimalSI", "1e-12", ""),
    (1, -10, "DecimalSI", "100e-12", ""),
]


@pytest.mark.parametrize(("mantissa", "exponent", "format", "canonical", "alternate"), STRING_ROWS,
                         ids=[f"{r[3]}-{r[2]}" for r in STRING_ROWS])
def test_string(mantissa: int, exponent: int, format: str, canonical: str, alternate: str) -> None:
    quantity = Quantity.from_parts(mantissa, exponent, format)  # type: ignore[arg-type]
    assert str(quantity) == canonical
    negative = Quantity.from_parts(-mantissa, exponent, format)  # type: ignore[arg-type]
    assert str(negative) == ("0" if mantissa == 0 else "-" + canonical)
    if exponent > -10:
        # The canonical form parses back to the same amount (below-nano rows cannot, by design).
        assert Quantity.parse(canonical) == quantity
    if alternate:
        assert canonical_quantity(alternate) == canonical


PARSE_EMIT_ROWS = [
    ("1Ki", "1Ki"),
    ("1Mi", "1Mi"),
    ("1Gi", "1Gi"),
    ("1024Mi", "1Gi"),
    ("1000M", "1G"),
    (".001Ki", "1024m"),
    (".000001Ki", "1024u"),
    (".000000001Ki", "1024n"),
    (".000000000001Ki", "2n"),
    # The issue's own examples, and the capacity-factor page's "1.5" shown as 1500m.
    ("1.5", "1500m"),
    ("0.5", "500m"),
    ("1000u", "1m"),
    ("3", "3"),
]


@pytest.mark.parametrize(("text", "canonical"), PARSE_EMIT_ROWS, ids=[r[0] for r in PARSE_EMIT_ROWS])
def test_parse_emit(text: str, canonical: str) -> None:
    assert canonical_quantity(text) == canonical
    assert canonical_quantity("-" + text) == "-" + canonical


INVALID = ["", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-",
           "1e4294967297", " 1", "1 ", "Non-Numeric", "1Kib", "1e", "1.5x"]


@pytest.mark.parametrize("text", INVALID)
def test_invalid(text: str) -> None:
    with pytest.raises(QuantityError):
        Quantity.parse(text)


def test_empty_number_reads_as_zero_like_apimachinery() -> None:
    # parseQuantityString("." ) yields num "0": apimachinery accepts these as zero.
    assert Quantity.parse(".").is_zero() and Quantity.parse("-.").is_zero()


def test_ordering_and_value() -> None:
    assert Quantity.parse("100m") > Quantity.parse("50m")
    assert Quantity.parse("10000T") > Quantity.parse("100Gi")
    assert Quantity.parse("1Ki") == Quantity.parse("1024")
    assert Quantity.parse("1500m").value() == 2
    assert Quantity.parse("-1500m").value() == -1
    assert Quantity.parse("0").sign() == 0 and Quantity.parse("-1m").sign() == -1


PERCENT_ROWS: list[tuple[int | str, int, bool, int]] = [
    (5, 100, True, 5),
    (5, 100, False, 5),
    ("25%", 100, True, 25),
    ("25%", 4, False, 1),
    ("25%", 5, True, 2),     # surge rounds up
    ("25%", 5, False, 1),    # unavailable rounds down
    ("1%", 10, True, 1),
    ("1%", 10, False, 0),
    ("10%", 5, True, 1),
    ("50%", 5, False, 2),
    ("100%", 7, True, 7),
    ("0%", 7, True, 0),
    ("120%", 10, True, 12),
    ("33%", 3, True, 1),
    ("29%", 100, True, 29),  # float64 arithmetic, as Kubernetes does it
]


@pytest.mark.parametrize(("value", "total", "round_up", "expected"), PERCENT_ROWS)
def test_scaled_value_from_int_or_percent(value: int | str, total: int, round_up: bool, expected: int) -> None:
    assert scaled_value_from_int_or_percent(value, total, round_up) == expected


@pytest.mark.parametrize("value", ["abc", "5", "%", "5.5%", "x%"])
def test_scaled_value_refuses_non_percentages(value: str) -> None:
    with pytest.raises(ValueError):
        scaled_value_from_int_or_percent(value, 10, True)


FENCEPOST_ROWS: list[tuple[int | str, int | str, int, tuple[int, int]]] = [
    ("25%", "25%", 4, (1, 1)),
    ("25%", "25%", 5, (2, 1)),     # surge up, unavailable down
    ("25%", "25%", 1, (1, 0)),
    (0, 0, 3, (0, 1)),             # never both zero: Kubernetes lets one Instance go
    ("0%", "0%", 10, (0, 1)),
    (1, 0, 4, (1, 0)),
    ("10%", "10%", 3, (1, 0)),
]


@pytest.mark.parametrize(("surge", "unavailable", "desired", "expected"), FENCEPOST_ROWS)
def test_resolve_fenceposts(surge: int | str, unavailable: int | str, desired: int, expected: tuple[int, int]) -> None:
    from models.quantity import resolve_fenceposts

    assert resolve_fenceposts(surge, unavailable, desired) == expected


CANARY_ROWS: list[tuple[int | str, int, int]] = [
    ("25%", 4, 1), ("25%", 5, 2), ("25%", 1, 1), ("100%", 7, 7), ("0%", 7, 0), ("10%", 3, 1),
    (2, 4, 2), (9, 4, 4), (0, 4, 0),
]


@pytest.mark.parametrize(("capacity", "desired", "expected"), CANARY_ROWS)
def test_canary_step_instances_round_up(capacity: int | str, desired: int, expected: int) -> None:
    from models.quantity import canary_step_instances

    assert canary_step_instances(capacity, desired) == expected
