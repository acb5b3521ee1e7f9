"""Go duration parsing and printing (models.duration)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from models.duration import Duration, format_duration, parse_duration

pytestmark = pytest.mark.unit

PARSE_ROWS = [
    ("30m", 1800.0), ("1h30m", 5400.0), ("10s", 10.0), ("500ms", 0.5), ("1.5h", 5400.0), ("0", 0.0),
    ("0s", 0.0), ("-5m", -300.0), ("+5m", 300.0), ("1h0m0s", 3600.0), ("2us", 2e-6), ("3\u00b5s", 3e-6),
    ("100ns", 1e-7), (".5s", 0.5), ("1.s", 1.0), ("15m", 900.0),
]


@pytest.mark.parametrize(("text", "seconds"), PARSE_ROWS)
def test_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "30", "10", "1d", "m", "1h 30m", "abc", "-", "1.2.3s", "s10"])
def test_refuse(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


FORMAT_ROWS = [
    (600.0, "10m0s"), (3600.0, "1h0m0s"), (0.0, "0s"), (1.5, "1.5s"), (0.5, "500ms"), (5400.0, "1h30m0s"),
    (2700.0, "45m0s"), (-300.0, "-5m0s"), (1e-6, "1\u00b5s"), (61.25, "1m1.25s"),
]


@pytest.mark.parametrize(("seconds", "text"), FORMAT_ROWS)
def test_format(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_pydantic_type_keeps_the_text_and_reports_invalid_duration() -> None:
    class Holder(BaseModel):
        timeout: Duration

    assert Holder(timeout="45m").timeout == "45m"
    with pytest.raises(ValidationError) as caught:
        Holder(timeout="30")
    assert caught.value.errors()[0]["type"] == "invalid_duration"
