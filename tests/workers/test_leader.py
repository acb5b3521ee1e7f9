"""Leader election (`workers.leader`) against kubesim's Leases, with the official client's
CoordinationV1Api: one leader at a time, takeover after the lease duration when the leader
stops renewing, a release hands over at once, and a race for an expired Lease has one winner."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml

from kubesim.handle import KubeSim
from tests.unit.deploy_usage import logged_client
from workers.config import LeaderSettings
from workers.leader import CONTROLLER_LEASE, WATCHER_LEASE, LeaderElector, lease_body

pytestmark = pytest.mark.kubesim

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
FAST = LeaderSettings(lease_duration_seconds=2.0, renew_deadline_seconds=1.4, retry_period_seconds=0.2)


class Leading:
    """A `lead` coroutine that records when it started and stopped, and what it took over."""

    def __init__(self) -> None:
        self.started: list[float] = []
        self.stopped: list[float] = []
        self.taken_over: list[dict[str, str]] = []

    async def __call__(self, previous: Mapping[str, str]) -> None:
        self.started.append(time.monotonic())
        self.taken_over.append(dict(previous))
        try:
            await asyncio.Event().wait()
        finally:
            self.stopped.append(time.monotonic())


async def wait_for(check: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def lease(sim: KubeSim, name: str = WATCHER_LEASE) -> kubernetes.client.V1Lease:
    return kubernetes.client.CoordinationV1Api(sim.api_client()).read_namespaced_lease(name, "default")


def elector(sim: KubeSim, identity: str, **kwargs: Any) -> LeaderElector:
    settings = FAST.model_copy(update={"identity": identity})
    return LeaderElector(sim.api_client(), WATCHER_LEASE, settings, **kwargs)


async def test_one_leads_and_the_other_takes_over_after_the_lease_when_renewals_stop(kubesim: KubeSim) -> None:
    a, b = elector(kubesim, "a", annotations=lambda: {"ome.io/delivered": '{"pods": "7"}'}), elector(kubesim, "b")
    lead_a, lead_b = Leading(), Leading()
    stop = asyncio.Event()
    run_a = asyncio.create_task(a.run(stop, lead_a))
    await wait_for(lambda: a.leading)
    run_b = asyncio.create_task(b.run(stop, lead_b))
    await asyncio.sleep(2.5)  # longer than the lease: a renews, so b stays a standby
    assert a.leading and not b.leading and not lead_b.started
    record = lease(kubesim)
    assert record.spec.holder_identity == "a" and record.spec.lease_duration_seconds == 2
    assert record.metadata.annotations == {"ome.io/delivered": '{"pods": "7"}'}

    def unreachable() -> bool:
        raise ConnectionError("API server unreachable")

    a.try_acquire_or_renew = unreachable  # type: ignore[method-assign]
    cut = time.monotonic()
    await wait_for(lambda: b.leading)
    took = time.monotonic() - cut
    # b's `lead` runs as a task of its own: it records its start at its first step.
    await wait_for(lambda: bool(lead_b.started))
    # a stopped acting at its renew deadline, before b could start: never two leaders.
    assert lead_a.stopped and lead_a.stopped[0] < lead_b.started[0]
    assert not a.leading
    assert FAST.lease_duration_seconds - FAST.retry_period_seconds <= took <= FAST.lease_duration_seconds + 1.5, took
    record = lease(kubesim)
    assert (record.spec.holder_identity, record.spec.lease_transitions) == ("b", 1)
    # b received what a had written with its last renewal.
    assert lead_b.taken_over == [{"ome.io/delivered": '{"pods": "7"}'}]
    stop.set()
    await asyncio.gather(run_a, run_b)


async def test_a_stopped_leader_releases_and_the_standby_takes_over_at_its_next_read(kubesim: KubeSim) -> None:
    a, b = elector(kubesim, "a"), elector(kubesim, "b")
    stop_a, stop_b = asyncio.Event(), asyncio.Event()
    run_a = asyncio.create_task(a.run(stop_a, Leading()))
    await wait_for(lambda: a.leading)
    run_b = asyncio.create_task(b.run(stop_b, Leading()))
    await asyncio.sleep(0.3)
    stop_a.set()
    await run_a
    released = time.monotonic()
    await wait_for(lambda: b.leading)
    assert time.monotonic() - released < FAST.lease_duration_seconds / 2
    stop_b.set()
    await run_b


async def test_a_race_for_an_expired_lease_has_exactly_one_winner(kubesim: KubeSim) -> None:
    now = [1000.0]
    electors = [elector(kubesim, name, clock=lambda: now[0]) for name in ("a", "b", "c")]
    holder = elector(kubesim, "dead", clock=lambda: now[0])
    assert holder.try_acquire_or_renew()
    for candidate in electors:
        assert not candidate.try_acquire_or_renew()  # held: each one notes when it saw it
    now[0] += 5.0  # "dead" never renewed
    # Every candidate reads the expired record before any of them writes.
    barrier = threading.Barrier(len(electors))
    for candidate in electors:
        read = candidate.api.read_namespaced_lease

        def read_then_wait(*args: Any, _read: Any = read, **kwargs: Any) -> Any:
            answer = _read(*args, **kwargs)
            barrier.wait(5)
            return answer

        candidate.api.read_namespaced_lease = read_then_wait  # type: ignore[method-assign]
    won = await asyncio.gather(*(asyncio.to_thread(c.try_acquire_or_renew) for c in electors))
    assert sorted(won) == [False, False, True]
    winner = electors[won.index(True)].identity
    assert lease(kubesim).spec.holder_identity == winner
    assert lease(kubesim).spec.lease_transitions == 1


async def test_the_first_two_create_the_lease_and_one_wins(kubesim: KubeSim) -> None:
    electors = [elector(kubesim, name) for name in ("a", "b")]
    won = await asyncio.gather(*(asyncio.to_thread(c.try_acquire_or_renew) for c in electors))
    assert sorted(won) == [False, True]


def role_grants(path: str, lease_name: str) -> set[tuple[str, str, str]]:
    role = next(doc for doc in yaml.safe_load_all((DEPLOY / path).read_text()) if doc and doc["kind"] == "Role")
    grants = set()
    for rule in role["rules"]:
        assert rule.get("resourceNames", [lease_name]) == [lease_name], f"{path}: only the Lease {lease_name}"
        grants |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return grants


@pytest.mark.parametrize(
    ("path", "lease_name"), [("rbac.yaml", WATCHER_LEASE), ("controller.yaml", CONTROLLER_LEASE)]
)
async def test_an_election_sends_exactly_what_the_accounts_role_grants(
    kubesim: KubeSim, path: str, lease_name: str
) -> None:
    used: set[tuple[str, str, str]] = set()
    settings = FAST.model_copy(update={"identity": "a"})
    a = LeaderElector(logged_client(kubesim, used), lease_name, settings)
    stop = asyncio.Event()
    run = asyncio.create_task(a.run(stop, Leading()))
    await wait_for(lambda: a.leading)
    await asyncio.sleep(0.3)  # renewals
    b = LeaderElector(logged_client(kubesim, used), lease_name, settings.model_copy(update={"identity": "b"}))
    assert not b.try_acquire_or_renew()  # a standby's read
    stop.set()
    await run
    assert used == role_grants(path, lease_name)


async def test_a_leader_whose_renewal_hangs_stops_at_its_renew_deadline(kubesim: KubeSim) -> None:
    """Review finding 1: the deadline is a timer, not a check after the blocking renewal returns;
    each Lease request times out by the deadline and is not retried."""
    a, lead_a = elector(kubesim, "a"), Leading()
    assert a.api.api_client.rest_client.pool_manager.connection_pool_kw["retries"].total is False
    stop = asyncio.Event()
    run = asyncio.create_task(a.run(stop, lead_a))
    await wait_for(lambda: a.leading)
    await asyncio.sleep(0.3)  # a few renewals
    hung, timeouts = threading.Event(), []

    def hanging_put(*args: Any, _request_timeout: float, **kwargs: Any) -> Any:
        timeouts.append(_request_timeout)
        hung.wait(10)  # an API server that never answers, a client that ignores its timeout
        raise ConnectionError("timed out")

    a.api.replace_namespaced_lease = hanging_put  # type: ignore[method-assign]
    await wait_for(lambda: bool(lead_a.stopped), 5.0)
    renewed_at = a._renewed_at
    assert not a.leading
    assert lead_a.stopped[0] - renewed_at <= FAST.renew_deadline_seconds + 0.1
    assert timeouts and all(t <= FAST.renew_deadline_seconds / 2 for t in timeouts)
    hung.set()
    stop.set()
    await run


def test_lease_times_are_sent_with_a_six_digit_fraction_and_z() -> None:
    """Review finding 8: `isoformat()` drops the fraction at 0 microseconds; MicroTime needs it."""
    on_the_second = datetime(2026, 12, 2, 15, 0, 0, tzinfo=UTC)
    lease = kubernetes.client.V1Lease(
        spec=kubernetes.client.V1LeaseSpec(holder_identity="a", acquire_time=on_the_second, renew_time=on_the_second)
    )
    spec = lease_body(kubernetes.client.ApiClient(), lease)["spec"]
    assert spec["acquireTime"] == spec["renewTime"] == "2026-12-02T15:00:00.000000Z"
    assert spec["holderIdentity"] == "a"


@pytest.mark.parametrize("failure", [ValueError("a bug in lead"), None])
async def test_a_lead_that_fails_or_returns_ends_the_run_and_releases_the_lease(
    kubesim: KubeSim, failure: Exception | None
) -> None:
    """Review finding 9: `lead` runs until cancelled; an error or a return ends `run` (the
    process), and the Lease is released first, so the standby takes over at once."""

    async def lead(_: Mapping[str, str]) -> None:
        await asyncio.sleep(0.1)
        if failure is not None:
            raise failure

    a = elector(kubesim, "a")
    with pytest.raises(ValueError if failure is not None else RuntimeError):
        await asyncio.wait_for(a.run(asyncio.Event(), lead), 5)
    assert not a.leading and lease(kubesim).spec.holder_identity is None
