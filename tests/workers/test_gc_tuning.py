"""`OME_WORKER__GC_YOUNG_THRESHOLD`: the worker collects its young generation less often, so
objects that live through one workflow task are not moved to the old generation, whose
collections walk every cached workflow run (issue 17's bench: 13% of the worker's CPU while
2,000 Instances came up)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from workers.config import Settings
from workers.worker import tune_gc


@pytest.fixture
def gc_as_it_was() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    yield before
    gc.unfreeze()
    gc.set_threshold(*before)


def test_the_young_threshold_is_raised_and_the_others_kept(gc_as_it_was: tuple[int, int, int]) -> None:
    tune_gc(50_000)
    assert gc.get_threshold() == (50_000, *gc_as_it_was[1:])
    # What the worker holds at start is left out of the old generation's walks.
    assert gc.get_freeze_count() > 0


def test_zero_leaves_the_collector_as_it_is(gc_as_it_was: tuple[int, int, int]) -> None:
    frozen = gc.get_freeze_count()
    tune_gc(0)
    assert gc.get_threshold() == gc_as_it_was
    assert gc.get_freeze_count() == frozen


def test_the_setting_defaults_to_50000_and_refuses_a_negative(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().worker.gc_young_threshold == 50_000
    monkeypatch.setenv("OME_WORKER__GC_YOUNG_THRESHOLD", "0")
    assert Settings().worker.gc_young_threshold == 0
    monkeypatch.setenv("OME_WORKER__GC_YOUNG_THRESHOLD", "-1")
    with pytest.raises(ValidationError, match="gc_young_threshold") as refused:
        Settings()
    assert "greater than or equal to 0" in str(refused.value)
