"""Events expire after the TTL (`kubesim.controllers.event_ttl`, the kube-apiserver's
`--event-ttl`), counted from their last write; a watch sees them go."""

from __future__ import annotations

import threading
import time

import kubernetes
from kubernetes import watch

from kubesim.handle import KubeSim
from kubesim.timing import Timing

TTL = 2.0


def event(name: str) -> dict[str, object]:
    return {
        "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default", "uid": f"uid-{name}"},
        "reason": "Tested",
        "message": name,
        "type": "Normal",
    }


def names(core: kubernetes.client.CoreV1Api) -> set[str]:
    return {e.metadata.name for e in core.list_namespaced_event("default").items}


def test_events_go_a_ttl_after_their_last_write_and_watchers_see_them_go() -> None:
    with KubeSim(topology=None, timing=Timing.fast()) as sim:
        sim.call(lambda: setattr(sim.cluster.event_expiry, "ttl_seconds", TTL))
        core = kubernetes.client.CoreV1Api(sim.api_client())
        listed = core.list_namespaced_event("default")
        deleted: list[str] = []

        def follow() -> None:
            for change in watch.Watch().stream(
                core.list_namespaced_event, "default", resource_version=listed.metadata.resource_version,
                timeout_seconds=10,
            ):
                if change["type"] == "DELETED":
                    deleted.append(change["object"].metadata.name)

        watcher = threading.Thread(target=follow, daemon=True)
        watcher.start()
        core.create_namespaced_event("default", event("old"))
        time.sleep(TTL * 0.5)
        core.create_namespaced_event("default", event("young"))
        time.sleep(TTL * 0.75)
        # `old` was written 1.25 TTL ago: gone. `young`, 0.75 TTL ago, is bumped: it lives on.
        core.patch_namespaced_event("young", "default", {"count": 2})
        assert names(core) == {"young"}, "an Event outlived its TTL"
        time.sleep(TTL * 0.5)
        assert names(core) == {"young"}, "a write did not start the Event's TTL again"
        time.sleep(TTL)
        assert names(core) == set()
        watcher.join(15)
        assert deleted == ["old", "young"]


def test_the_default_ttl_is_the_api_server_s_hour() -> None:
    with KubeSim(topology=None, timing=Timing.fast()) as sim:
        assert sim.cluster.event_expiry.ttl_seconds == 3600.0
