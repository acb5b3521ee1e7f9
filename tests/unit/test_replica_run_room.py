"""`planning.replica.batching.within_room`: which starts of a pass fit what a run of the
InferenceReplica may still start (`CHILDREN_PER_RUN`)."""

from __future__ import annotations

import pytest

from planning.replica.batching import within_room


@pytest.mark.parametrize(
    ("room", "creates", "surges", "expected"),
    [
        (5, [0, 1], [7, 8], ([0, 1], [7, 8])),  # everything fits
        (4, [0, 1], [7, 8], ([0, 1], [7, 8])),  # exactly
        (3, [0, 1], [7, 8], ([0, 1], [7])),  # new Instances first, then surges in plan order
        (2, [0, 1], [7, 8], ([0, 1], [])),
        (1, [0, 1], [7, 8], ([0], [])),
        (0, [0, 1], [7, 8], ([], [])),  # a full run starts nothing more
        (-3, [0, 1], [7, 8], ([], [])),  # past the limit (a pass's migrations): still nothing
        (2, [], [7, 8, 9], ([], [7, 8])),  # surges alone
        (10, [], [], ([], [])),
    ],
)
def test_within_room(room: int, creates: list[int], surges: list[int], expected: tuple[list[int], list[int]]) -> None:
    kept_creates, kept_surges = within_room(room, creates, surges)
    assert (list(kept_creates), list(kept_surges)) == expected
