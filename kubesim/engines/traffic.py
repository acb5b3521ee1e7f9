"""The synthetic request stream: which pods serve, what share each gets, and their counters.

Clients send each InferenceService its rate (see `behavior.py`), spread evenly over the pods
of each component that are serving at that moment, whatever their revision, as a Service
spreads connections over ready endpoints (spec reference §1.7: a revision's real share is its
share of the serving Instances). A pod serves when it runs an engine (see `engine_labels`),
is Ready, is not terminating, and its `ome.io/serving` condition is True if it has one (the
readiness gate the product sets True to put a pod into rotation and False to drain it). The
workers of a multi-pod Instance take no requests: clients reach an Instance through its leader.

Nothing runs in the background. For every (namespace, InferenceService, component) the model
keeps the requests offered to each serving pod so far, the integral of rate / serving pods
over time, and brings it up to date only when the serving set or the rate changes, or when
someone reads the counters (a scrape). So a pod's share is exact however rarely Prometheus
scrapes, and an idle cluster costs nothing.

A pod's series appear when its engine starts (phase Running) and go with the pod, or when its
`ome.io/revision` label changes (an in-place update restarts the engine under new labels).
They live in memory only: a kubesim restart starts every engine's counters again from zero,
which Prometheus reads as the counter reset of a restarted process.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kubesim.engines.behavior import TrafficSettings
from kubesim.engines.counting import SeriesCounts, error_phase
from kubesim.store import Change, Object

PODS = ("", "pods")
# The labels and the condition the product puts on its pods (models/pods.py in omeflow).
LABEL_ISVC = "ome.io/inferenceservice"
LABEL_COMPONENT = "ome.io/component"
LABEL_REVISION = "ome.io/revision"
LABEL_ROLE = "ome.io/role"
ROLE_WORKER = "worker"
SERVING_CONDITION = "ome.io/serving"

log = logging.getLogger("kubesim.engines")
GroupKey = tuple[str, str, str]  # namespace, InferenceService, component
_ROUNDING = 1e-9


@dataclass(frozen=True, order=True)
class SeriesLabels:
    """The labels every series of one engine carries (spec reference §2.3 names them)."""

    namespace: str
    inferenceservice: str
    component: str
    revision_hash: str
    pod: str

    @property
    def group(self) -> GroupKey:
        return (self.namespace, self.inferenceservice, self.component)


def engine_labels(pod: Object) -> SeriesLabels | None:
    """The series labels of the engine this pod runs, or None when it runs none: it is not one
    of an InferenceService's pods, is a worker of a multi-pod Instance, or is not Running."""
    meta = pod["metadata"]
    labels = meta.get("labels") or {}
    isvc, component = labels.get(LABEL_ISVC), labels.get(LABEL_COMPONENT)
    if not isvc or not component or labels.get(LABEL_ROLE) == ROLE_WORKER:
        return None
    if (pod.get("status") or {}).get("phase") != "Running":
        return None
    return SeriesLabels(meta.get("namespace") or "", isvc, component, labels.get(LABEL_REVISION, ""), meta["name"])


def _condition(pod: Object, kind: str) -> str | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return str(condition.get("status"))
    return None


def is_serving(pod: Object) -> bool:
    """Ready, not terminating, and in rotation when it has the serving gate or condition."""
    if pod["metadata"].get("deletionTimestamp") or _condition(pod, "Ready") != "True":
        return False
    gated = any(g.get("conditionType") == SERVING_CONDITION for g in (pod.get("spec") or {}).get("readinessGates") or [])
    serving = _condition(pod, SERVING_CONDITION)
    return serving == "True" if gated or serving is not None else True


def _images(pod: Object) -> list[str]:
    return [c.get("image") or "" for c in (pod.get("spec") or {}).get("containers") or []]


@dataclass
class _Group:
    """The serving pods of one component and what each has been offered."""

    since: float
    members: set[str] = field(default_factory=set)
    per_member: float = 0.0
    """Requests offered to a pod that served all along, up to `since`."""


@dataclass
class _Engine:
    labels: SeriesLabels
    images: list[str]
    serving: bool = False
    offered: float = 0.0
    """Requests offered during the serving spans that have ended."""
    joined_at: float = 0.0
    """The group's `per_member` when this span of serving began."""
    counts: SeriesCounts = field(default_factory=SeriesCounts)


class Traffic:
    """Every engine's counters, kept up to date from pod changes and the clock."""

    def __init__(self, settings: TrafficSettings | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings or TrafficSettings()
        self.clock = clock
        self._groups: dict[GroupKey, _Group] = {}
        self._engines: dict[str, _Engine] = {}  # by pod uid

    # ---- pods ------------------------------------------------------------------------------

    def on_change(self, change: Change) -> None:
        """A store subscriber: follow every pod change."""
        if change.type_key != PODS:
            return
        try:
            self.observe(change.obj, deleted=change.type == "DELETED")
        except Exception:  # the write that caused the change has happened: it must not fail
            log.exception("following pod %s for the simulated traffic failed", change.obj["metadata"].get("name"))

    def sync(self, pods: Iterable[Object]) -> None:
        """Follow these pods (all of them: on start, after a state file was restored)."""
        seen = set()
        for pod in pods:
            seen.add(pod["metadata"]["uid"])
            self.observe(pod)
        for uid in set(self._engines) - seen:
            self._forget(uid)

    def observe(self, pod: Object, deleted: bool = False) -> None:
        uid = pod["metadata"].get("uid") or ""
        labels = None if deleted else engine_labels(pod)
        engine = self._engines.get(uid)
        if engine is not None and engine.labels != labels:
            self._forget(uid)  # gone, or a new engine under new labels
            engine = None
        if labels is None:
            return
        if engine is None:
            counts = SeriesCounts(error_phase=error_phase(labels.pod))
            engine = self._engines[uid] = _Engine(labels, _images(pod), counts=counts)
        else:
            # Requests until now were answered by the image that was running until now.
            self._settle(engine)
            engine.images = _images(pod)
        serving = is_serving(pod)
        if serving and not engine.serving:
            self._join(uid, engine)
        elif engine.serving and not serving:
            self._leave(uid, engine)

    def _group(self, key: GroupKey) -> _Group:
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(since=self.clock())
        return group

    def _advance(self, key: GroupKey, group: _Group) -> None:
        now = self.clock()
        if group.members:
            rate = self.settings.rate(key[0], key[1])
            group.per_member += (now - group.since) * rate / len(group.members)
        group.since = now

    def _join(self, uid: str, engine: _Engine) -> None:
        key = engine.labels.group
        group = self._group(key)
        self._advance(key, group)
        group.members.add(uid)
        engine.joined_at = group.per_member
        engine.serving = True

    def _leave(self, uid: str, engine: _Engine) -> None:
        key = engine.labels.group
        group = self._groups[key]
        self._advance(key, group)
        engine.offered += group.per_member - engine.joined_at
        engine.serving = False
        group.members.discard(uid)
        self._answer(engine)
        if not group.members:
            del self._groups[key]  # nobody holds its offsets any more

    def _forget(self, uid: str) -> None:
        engine = self._engines.pop(uid)
        if engine.serving:
            self._leave(uid, engine)

    # ---- counting --------------------------------------------------------------------------

    def _settle(self, engine: _Engine) -> None:
        if engine.serving:
            key = engine.labels.group
            self._advance(key, self._groups[key])
        self._answer(engine)

    def _answer(self, engine: _Engine) -> None:
        """Count the whole requests offered to `engine` that it has not answered yet."""
        offered = engine.offered
        if engine.serving:
            offered += self._groups[engine.labels.group].per_member - engine.joined_at
        new = math.floor(offered + _ROUNDING) - engine.counts.requests
        engine.counts.answer(new, self.settings.behavior(engine.images))

    def settle_all(self) -> None:
        """Bring every engine's counters up to now."""
        for key, group in self._groups.items():
            self._advance(key, group)
        for engine in self._engines.values():
            self._answer(engine)

    def series(self) -> list[tuple[SeriesLabels, SeriesCounts]]:
        """Every engine's labels and counters as of now, in label order."""
        self.settle_all()
        return sorted(((e.labels, e.counts) for e in self._engines.values()), key=lambda item: item[0])

    # ---- settings --------------------------------------------------------------------------

    def set_rate(self, requests_per_second: float | None, namespace: str | None = None,
                 inferenceservice: str | None = None) -> None:
        """Change the offered load from now on (see `TrafficSettings.set_rate`)."""
        self.settle_all()
        self.settings.set_rate(requests_per_second, namespace, inferenceservice)

    def set_behavior(self, image: str, error_ratio: float | None = None, ttft_seconds: float | None = None) -> None:
        """Change how `image` answers from now on (see `TrafficSettings.set_behavior`)."""
        self.settle_all()
        self.settings.set_behavior(image, error_ratio, ttft_seconds)

    def describe(self) -> dict[str, Any]:
        """The settings and, per component, the rate it receives and the pods serving it."""
        names = {uid: engine.labels.pod for uid, engine in self._engines.items()}
        serving = [
            {"namespace": ns, "inferenceservice": isvc, "component": component,
             "requests_per_second": self.settings.rate(ns, isvc), "pods": sorted(names[uid] for uid in group.members)}
            for (ns, isvc, component), group in sorted(self._groups.items())
        ]
        return {**self.settings.describe(), "serving": serving}
