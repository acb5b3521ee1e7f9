"""Current/update revisions and the bounded history (reference §7)."""

from __future__ import annotations

import pytest

from planning.replica.revisions import (
    RevisionState,
    complete_rollout,
    history_limit,
    observe_template,
    rolling_back_to,
    trim_history,
)

pytestmark = pytest.mark.unit


def name(digest: str) -> str:
    return f"chat-engine-rev-{digest}"


def test_first_template_is_current_and_update() -> None:
    state = observe_template(RevisionState(), name("a"), "a")
    assert (state.current, state.update) == (name("a"), name("a"))
    assert not state.rolling_out


def test_new_template_becomes_update_revision() -> None:
    state = observe_template(observe_template(RevisionState(), name("a"), "a"), name("b"), "b")
    assert (state.current, state.update) == (name("a"), name("b"))
    assert state.rolling_out
    assert state.update_hash == "b"


def test_same_template_changes_nothing() -> None:
    state = observe_template(RevisionState(), name("a"), "a")
    assert observe_template(state, name("a"), "a") is state


def test_completion_promotes_update_to_current() -> None:
    state = observe_template(observe_template(RevisionState(), name("a"), "a"), name("b"), "b")
    assert complete_rollout(state).current == name("b")


def test_returning_template_reuses_its_revision_with_a_new_number() -> None:
    state = RevisionState()
    for digest in ("a", "b", "a"):
        state = observe_template(state, name(digest), digest)
    assert [record.name for record in state.history] == [name("b"), name("a")]
    record = state.record(name("a"))
    assert record is not None and record.number == 3


def _many(count: int) -> RevisionState:
    state = RevisionState()
    for number in range(count):
        state = complete_rollout(observe_template(state, name(str(number)), str(number)))
    return state


@pytest.mark.parametrize(
    ("limit", "kept"),
    [(None, 15), (10, 11), (0, 1), (3, 4)],
)
def test_history_keeps_limit_non_live_revisions(limit: int | None, kept: int) -> None:
    state = trim_history(_many(15), running=[], limit=limit)
    assert len(state.history) == kept
    assert state.history[-1].name == name("14")


def test_history_never_drops_a_running_revision() -> None:
    state = trim_history(_many(5), running=[name("0")], limit=0)
    assert {record.name for record in state.history} == {name("0"), name("4")}


def test_history_never_drops_what_a_rollout_run_names_to_return_to() -> None:
    # The canary completed on this component (current is the canary), the stable one is not live.
    state = trim_history(_many(5), running=[], limit=0, keep=[name("3")])
    assert {record.name for record in state.history} == {name("3"), name("4")}
    assert trim_history(_many(5), running=[], limit=0).history[0].name == name("4")


def test_a_rollback_shows_the_stable_revision_as_update_and_completes_onto_it() -> None:
    canary = observe_template(observe_template(RevisionState(), name("a"), "a"), name("b"), "b")
    shown = rolling_back_to(canary, name("a"))
    assert (shown.current, shown.update) == (name("a"), name("a"))
    assert rolling_back_to(canary, name("gone")) == canary
    assert rolling_back_to(canary, None) == canary
    # Back from a canary that had completed: the stable revision becomes current again.
    completed = complete_rollout(canary)
    assert complete_rollout(completed, to=name("a")).current == name("a")
    assert complete_rollout(canary, to=name("a")) is canary


@pytest.mark.parametrize(
    ("annotation", "default", "limit", "warns"),
    [
        (None, 10, 10, False),
        ("3", 10, 3, False),
        ("0", 10, 0, False),
        (" 5 ", None, 5, False),
        ("-1", 10, 10, True),
        ("ten", None, None, True),
    ],
)
def test_history_limit(annotation: str | None, default: int | None, limit: int | None, warns: bool) -> None:
    value, warning = history_limit(annotation, default)
    assert value == limit
    assert (warning is not None) is warns
    if warning:
        assert 'metadata.annotations["ome.io/revision-history-limit"]' in warning
