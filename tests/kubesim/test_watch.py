"""Watch semantics: event stream, resume from a resourceVersion, 410 when too old, timeouts,
bookmarks, selector transitions, ParseBool for `watch`."""

from __future__ import annotations

import http.client
import json
import time

import kubernetes
import pytest
from kubernetes.client.rest import ApiException

from kubesim.errors import ApiError
from kubesim.handle import KubeSim
from kubesim.store import Store
from tests.kubesim.helpers import Clients


def _raw_watch(k8s: Clients, query: str, max_seconds: float = 5.0) -> list[dict]:
    conn = http.client.HTTPConnection("127.0.0.1", k8s.sim.port, timeout=max_seconds + 5)
    conn.request("GET", f"/api/v1/namespaces/{k8s.namespace}/configmaps?{query}")
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.getheader("Transfer-Encoding") == "chunked"
    events = [json.loads(line) for line in resp.read().splitlines() if line.strip()]
    conn.close()
    return events


def test_watch_streams_changes_in_order(k8s: Clients) -> None:
    ns = k8s.namespace
    start = k8s.core.list_namespaced_config_map(ns).metadata.resource_version
    k8s.core.create_namespaced_config_map(ns, {"metadata": {"name": "w"}, "data": {"a": "1"}})
    k8s.core.patch_namespaced_config_map("w", ns, {"data": {"a": "2"}})
    k8s.core.delete_namespaced_config_map("w", ns)
    watch = kubernetes.watch.Watch()
    seen = []
    for event in watch.stream(k8s.core.list_namespaced_config_map, ns, resource_version=start, timeout_seconds=2):
        seen.append((event["type"], event["object"].metadata.name, (event["object"].data or {}).get("a")))
        if event["type"] == "DELETED":
            watch.stop()
    assert seen == [("ADDED", "w", "1"), ("MODIFIED", "w", "2"), ("DELETED", "w", "2")]


def test_watch_without_resource_version_starts_with_current_objects(k8s: Clients) -> None:
    k8s.core.create_namespaced_config_map(k8s.namespace, {"metadata": {"name": "there"}})
    events = _raw_watch(k8s, "watch=1&timeoutSeconds=1")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "there")]


def test_watch_is_closed_at_timeout_seconds(k8s: Clients) -> None:
    started = time.monotonic()
    events = _raw_watch(k8s, "watch=true&timeoutSeconds=1&resourceVersion=" +
                        k8s.core.list_namespaced_config_map(k8s.namespace).metadata.resource_version)
    assert events == []
    assert 0.9 <= time.monotonic() - started < 4


def test_watch_parses_booleans_like_go(k8s: Clients) -> None:
    url = f"/api/v1/namespaces/{k8s.namespace}/configmaps?watch=maybe"
    conn = http.client.HTTPConnection("127.0.0.1", k8s.sim.port, timeout=5)
    conn.request("GET", url)
    resp = conn.getresponse()
    assert resp.status == 400 and json.loads(resp.read())["kind"] == "Status"
    conn.close()
    # "T" is true for strconv.ParseBool, so this is a watch, not a list.
    events = _raw_watch(k8s, "watch=T&timeoutSeconds=1")
    assert events == []
    # "0" is false: a plain list.
    conn = http.client.HTTPConnection("127.0.0.1", k8s.sim.port, timeout=5)
    conn.request("GET", f"/api/v1/namespaces/{k8s.namespace}/configmaps?watch=0")
    assert json.loads(conn.getresponse().read())["kind"] == "ConfigMapList"
    conn.close()


def test_watch_from_compacted_version_gets_410(k8s: Clients) -> None:
    old = k8s.core.create_namespaced_config_map(k8s.namespace, {"metadata": {"name": "old"}})
    k8s.core.create_namespaced_config_map(k8s.namespace, {"metadata": {"name": "newer"}})
    k8s.sim.compact()
    events = _raw_watch(k8s, f"watch=true&timeoutSeconds=2&resourceVersion={old.metadata.resource_version}")
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"
    # The official client turns the ERROR event into an ApiException(410) for the caller.
    watch = kubernetes.watch.Watch()
    with pytest.raises(ApiException) as err:
        for _ in watch.stream(k8s.core.list_namespaced_config_map, k8s.namespace,
                              resource_version=old.metadata.resource_version, timeout_seconds=2):
            pass
    assert err.value.status == 410


def test_bookmarks_and_initial_events_end(k8s: Clients) -> None:
    k8s.core.create_namespaced_config_map(k8s.namespace, {"metadata": {"name": "x"}})
    events = _raw_watch(k8s, "watch=true&timeoutSeconds=1&allowWatchBookmarks=true&sendInitialEvents=true"
                        "&resourceVersionMatch=NotOlderThan")
    assert [e["type"] for e in events[:2]] == ["ADDED", "BOOKMARK"]
    bookmark = events[1]["object"]
    assert bookmark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(bookmark["metadata"]["resourceVersion"]) >= int(events[0]["object"]["metadata"]["resourceVersion"])


def test_label_selector_watch_reports_objects_leaving_and_entering(k8s: Clients) -> None:
    ns = k8s.namespace
    start = k8s.core.list_namespaced_config_map(ns).metadata.resource_version
    k8s.core.create_namespaced_config_map(ns, {"metadata": {"name": "m", "labels": {"sel": "yes"}}})
    k8s.core.patch_namespaced_config_map("m", ns, {"metadata": {"labels": {"sel": "no"}}})
    k8s.core.patch_namespaced_config_map("m", ns, {"metadata": {"labels": {"sel": "yes"}}})
    events = _raw_watch(k8s, f"watch=true&timeoutSeconds=1&labelSelector=sel%3Dyes&resourceVersion={start}")
    assert [e["type"] for e in events] == ["ADDED", "DELETED", "ADDED"]


def test_watch_resumes_after_a_cut_stream(k8s: Clients) -> None:
    ns = k8s.namespace
    start = k8s.core.list_namespaced_config_map(ns).metadata.resource_version
    k8s.sim.inject_faults(watch_cut_seconds=0.3)
    try:
        cut_started = time.monotonic()
        assert _raw_watch(k8s, f"watch=true&timeoutSeconds=30&resourceVersion={start}") == []
        assert time.monotonic() - cut_started < 5
    finally:
        k8s.sim.clear_faults()
    k8s.core.create_namespaced_config_map(ns, {"metadata": {"name": "after-cut"}})
    events = _raw_watch(k8s, f"watch=true&timeoutSeconds=1&resourceVersion={start}")
    assert [e["object"]["metadata"]["name"] for e in events] == ["after-cut"]


def test_idle_watch_gets_periodic_bookmarks(kubesim: KubeSim) -> None:
    kubesim.cluster.server.bookmark_seconds = 0.2
    core = kubernetes.client.CoreV1Api(kubesim.api_client())
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    conn = http.client.HTTPConnection("127.0.0.1", kubesim.port, timeout=10)
    conn.request("GET", f"/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1"
                 f"&allowWatchBookmarks=true&resourceVersion={rv}")
    code_events = [json.loads(line) for line in conn.getresponse().read().splitlines() if line.strip()]
    conn.close()
    assert len(code_events) >= 2 and {e["type"] for e in code_events} == {"BOOKMARK"}
    assert all(e["object"]["kind"] == "ConfigMap" and e["object"]["metadata"]["resourceVersion"]
               for e in code_events)


def test_the_history_keeps_five_minutes_like_the_api_servers_compaction() -> None:
    """Changes older than the retention leave the history at the next commit (a watch from
    before them gets 410 and re-lists, as against a real cluster); a month-long run no
    longer keeps every pod it ever wrote."""
    now = [0.0]
    store = Store(clock=lambda: now[0])

    def write() -> None:
        store.put(("", "pods"), {"metadata": {"name": "p", "namespace": "ns"}})

    write()
    first = store.rv
    write()
    now[0] = 299.0
    write()
    assert [c.rv for c in store.changes_since(first - 1)] == [first, first + 1, first + 2]
    now[0] = 301.0
    write()  # the first two changes are older than 300 s now
    with pytest.raises(ApiError) as gone:
        store.changes_since(first - 1)
    assert gone.value.code == 410
    assert [c.rv for c in store.changes_since(first + 1)] == [first + 2, first + 3]
