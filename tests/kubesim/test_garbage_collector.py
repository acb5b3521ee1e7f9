"""The incremental garbage collector (`kubesim.controllers.gc`) in the cases its indexes and
queues make subtle: owners gone before their dependents come, references partly dead, a
foreground owner whose last dependent goes, a start with objects already stored, references
gained by an update, and random histories after which its indexes must equal a rebuild from
the store and the store must be what a full pass leaves alone."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubesim.cluster import Cluster
from kubesim.controllers.gc import GarbageCollector
from kubesim.errors import ApiError
from kubesim.fastjson import clone
from kubesim.store import Object
from kubesim.timing import Timing

pytestmark = pytest.mark.kubesim

NS = "default"
CM = ("", "configmaps")
HOLD = "example.com/hold"


def collector(sim: Cluster) -> GarbageCollector:
    return next(c for c in sim.controllers if isinstance(c, GarbageCollector))


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    sim = Cluster(None, Timing.fast())
    await sim.start()
    try:
        yield sim
    finally:
        await sim.stop()


def ref(owner: Object | str) -> Object:
    """An ownerReference to a stored ConfigMap, or to a uid that names nothing."""
    if isinstance(owner, str):
        return {"apiVersion": "v1", "kind": "ConfigMap", "name": f"never-{owner}", "uid": owner}
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"]}


def make(sim: Cluster, name: str, *owners: Object | str, hold: bool = False) -> Object:
    meta: Object = {"name": name}
    if owners:
        meta["ownerReferences"] = [ref(o) for o in owners]
    if hold:
        meta["finalizers"] = [HOLD]
    return sim.api.create(sim.api.type_of(*CM), NS, {"metadata": meta}, "test")


def get(sim: Cluster, name: str) -> Object | None:
    return sim.store.get(CM, NS, name)


def update(sim: Cluster, name: str, **meta: Any) -> None:
    current = get(sim, name)
    assert current is not None
    updated = clone(current)
    for field, value in meta.items():
        if value is None:
            updated["metadata"].pop(field, None)
        else:
            updated["metadata"][field] = value
    sim.api.write(sim.api.type_of(*CM), updated, "test")


def delete(sim: Cluster, name: str, policy: str | None = None) -> None:
    sim.api.delete(sim.api.type_of(*CM), NS, name, {"propagationPolicy": policy} if policy else None)


def owner_uids(sim: Cluster, name: str) -> list[str]:
    obj = get(sim, name)
    assert obj is not None, f"{name} was collected"
    return [r["uid"] for r in obj["metadata"].get("ownerReferences") or []]


async def settle(sim: Cluster, seconds: float = 10.0) -> None:
    """Until the collector has nothing queued and the store stays still for a while."""
    gc = collector(sim)
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        rv = sim.store.rv
        await asyncio.sleep(0.05)
        if rv == sim.store.rv and not (gc._check or gc._owners or gc._resync or gc._dirty.is_set()):
            return
    raise AssertionError("the garbage collector did not settle")


def assert_fixpoint(sim: Cluster) -> None:
    """The collector's indexes are those a rebuild makes, and a full pass would write nothing."""
    gc = collector(sim)
    stored = [(tk, obj) for tk in sim.store.type_keys() for obj in sim.store.list(tk)]
    where = {o["metadata"]["uid"]: (tk, o["metadata"].get("namespace") or "", o["metadata"]["name"])
             for tk, o in stored}
    dependents: dict[str, set[Any]] = {}
    for tk, o in stored:
        for r in o["metadata"].get("ownerReferences") or []:
            dependents.setdefault(r["uid"], set()).add((tk, o["metadata"].get("namespace") or "", o["metadata"]["name"]))
    assert gc._where == where
    assert gc._dependents == dependents
    for _, o in stored:
        meta = o["metadata"]
        refs, finalizers = meta.get("ownerReferences") or [], meta.get("finalizers") or []
        if refs and not meta.get("deletionTimestamp"):
            assert all(r["uid"] in where for r in refs), f"{meta['name']} kept a reference to a gone owner"
        assert "orphan" not in finalizers, f"{meta['name']} still orphaning"
        if "foregroundDeletion" in finalizers:
            waiting = [sim.store.get(*key) for key in dependents.get(meta["uid"], ())]
            assert waiting, f"{meta['name']} held with no dependents"
            assert all(d is not None and d["metadata"].get("deletionTimestamp") for d in waiting)


# ---- scenarios ---------------------------------------------------------------------------------


async def test_a_dependent_of_an_owner_already_gone_or_never_there_is_collected(cluster: Cluster) -> None:
    owner = make(cluster, "owner")
    delete(cluster, "owner")
    make(cluster, "late", owner)
    make(cluster, "dangling", "no-such-uid")
    await settle(cluster)
    assert get(cluster, "late") is None and get(cluster, "dangling") is None
    assert_fixpoint(cluster)


async def test_references_to_gone_owners_are_dropped_while_one_owner_lives(cluster: Cluster) -> None:
    a, b = make(cluster, "a"), make(cluster, "b")
    make(cluster, "born-half-dead", a, "no-such-uid")
    make(cluster, "two-owners", a, b)
    await settle(cluster)
    assert owner_uids(cluster, "born-half-dead") == [a["metadata"]["uid"]]
    delete(cluster, "a")
    await settle(cluster)
    assert get(cluster, "born-half-dead") is None
    assert owner_uids(cluster, "two-owners") == [b["metadata"]["uid"]]
    delete(cluster, "b")
    await settle(cluster)
    assert get(cluster, "two-owners") is None
    assert_fixpoint(cluster)


@pytest.mark.parametrize("last_goes_by", ["finalizer removed", "reference dropped"])
async def test_a_foreground_owner_goes_when_its_last_dependent_does(cluster: Cluster, last_goes_by: str) -> None:
    owner = make(cluster, "owner")
    make(cluster, "quick", owner)
    make(cluster, "slow", owner, hold=True)
    delete(cluster, "owner", "Foreground")
    await settle(cluster)
    assert get(cluster, "quick") is None
    held = get(cluster, "owner")
    assert held is not None and held["metadata"]["finalizers"] == ["foregroundDeletion"]
    # A dependent that comes while the owner waits is deleted too.
    make(cluster, "newcomer", owner)
    await settle(cluster)
    assert get(cluster, "newcomer") is None and get(cluster, "owner") is not None
    if last_goes_by == "finalizer removed":
        update(cluster, "slow", finalizers=None)
    else:
        update(cluster, "slow", ownerReferences=None)
    await settle(cluster)
    assert get(cluster, "owner") is None
    assert_fixpoint(cluster)


async def test_orphaning_one_owner_keeps_the_others_references(cluster: Cluster) -> None:
    a, b = make(cluster, "a"), make(cluster, "b")
    make(cluster, "shared", a, b)
    make(cluster, "only-a", a)
    delete(cluster, "a", "Orphan")
    await settle(cluster)
    assert get(cluster, "a") is None
    assert owner_uids(cluster, "shared") == [b["metadata"]["uid"]]
    assert owner_uids(cluster, "only-a") == []
    assert_fixpoint(cluster)


async def test_an_object_that_gains_an_owner_reference_by_an_update(cluster: Cluster) -> None:
    owner = make(cluster, "owner")
    make(cluster, "to-dead")
    make(cluster, "to-live")
    await settle(cluster)
    update(cluster, "to-dead", ownerReferences=[ref("no-such-uid")])
    update(cluster, "to-live", ownerReferences=[ref(owner)])
    await settle(cluster)
    assert get(cluster, "to-dead") is None
    assert owner_uids(cluster, "to-live") == [owner["metadata"]["uid"]]
    delete(cluster, "owner")
    await settle(cluster)
    assert get(cluster, "to-live") is None
    assert_fixpoint(cluster)


async def test_a_start_with_objects_already_stored_does_a_full_pass() -> None:
    """As after a restore from a saved state: the store is full and announced no changes."""
    sim = Cluster(None, Timing.fast())
    sim.bootstrap()
    live, gone = make(sim, "live"), make(sim, "gone")
    delete(sim, "gone")
    make(sim, "orphaned-by-the-restart", gone)
    make(sim, "half", live, gone)
    make(sim, "kept", live)
    waiting = make(sim, "waiting")
    delete(sim, "waiting", "Foreground")  # nothing depends on it: only the finalizer holds it
    orphaning = make(sim, "orphaning")
    make(sim, "freed", orphaning)
    delete(sim, "orphaning", "Orphan")
    assert get(sim, "waiting") is not None and get(sim, "orphaning") is not None
    await sim.start()
    try:
        await settle(sim)
        assert get(sim, "orphaned-by-the-restart") is None
        assert owner_uids(sim, "half") == [live["metadata"]["uid"]]
        assert owner_uids(sim, "kept") == [live["metadata"]["uid"]]
        assert get(sim, "waiting") is None and waiting["metadata"]["uid"] not in collector(sim)._where
        assert get(sim, "orphaning") is None and owner_uids(sim, "freed") == []
        assert_fixpoint(sim)
    finally:
        await sim.stop()


async def test_changes_that_concern_no_owner_queue_nothing(cluster: Cluster) -> None:
    gc = collector(cluster)
    await settle(cluster)
    owner = make(cluster, "owner")
    for i in range(20):
        make(cluster, f"plain-{i}")
        make(cluster, f"owned-{i}", owner)
        update(cluster, f"owned-{i}", labels={"i": str(i)})
    delete(cluster, "plain-0")
    # Checked synchronously: no reconcile has run since these writes.
    assert not gc._check and not gc._owners
    assert len(gc._dependents[owner["metadata"]["uid"]]) == 20


# ---- random histories --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
async def test_random_histories_leave_the_indexes_exact_and_nothing_to_collect(cluster: Cluster, seed: int) -> None:
    rng = random.Random(seed)
    names = [f"c{i}" for i in range(12)]
    seen: list[str] = ["never-existed"]  # uids of every ConfigMap made so far (some gone)
    rebuilds = 0
    gc = collector(cluster)
    await settle(cluster)  # past the start's rebuild
    rebuild = gc._rebuild

    def counted() -> None:
        nonlocal rebuilds
        rebuilds += 1
        rebuild()

    gc._rebuild = counted  # type: ignore[method-assign]
    for _ in range(150):
        name = rng.choice(names)
        current = get(cluster, name)
        owners = [uid for uid in rng.sample(seen, min(len(seen), rng.randint(0, 2))) if uid]
        try:
            if current is None:
                made = make(cluster, name, *owners, hold=rng.random() < 0.25)
                seen.append(made["metadata"]["uid"])
            elif rng.random() < 0.3:
                update(cluster, name, ownerReferences=[ref(uid) for uid in owners] or None)
            elif rng.random() < 0.3 and HOLD in (current["metadata"].get("finalizers") or []):
                update(cluster, name, finalizers=[f for f in current["metadata"]["finalizers"] if f != HOLD] or None)
            else:
                delete(cluster, name, rng.choice([None, "Background", "Foreground", "Orphan"]))
        except ApiError:
            pass  # e.g. a finalizer added to a terminating object
        if rng.random() < 0.2:
            await asyncio.sleep(rng.choice([0, 0.005, 0.02]))
    await settle(cluster)
    assert_fixpoint(cluster)
    assert rebuilds == 0, "a full pass ran outside the start"


async def test_a_restore_while_running_is_indexed_afresh(cluster: Cluster) -> None:
    """A restore replaces the objects without announcing changes: the next reconcile (woken by any
    change) reads the store again, so a dependent restored without its owner is collected."""
    owner = make(cluster, "owner")
    make(cluster, "dependent", owner)
    await settle(cluster)
    saved = cluster.store.snapshot()
    saved["objects"] = [o for o in saved["objects"] if o["object"]["metadata"]["name"] != "owner"]
    cluster.store.restore(saved)
    make(cluster, "wake")  # any change wakes the collector
    await settle(cluster)
    assert get(cluster, "dependent") is None
    assert_fixpoint(cluster)
