"""The `ome.*` attributes of a trace span, read from a workflow ID and an operation's input.

A person looking at a trace wants to know which InferenceService, component, Instance and
revision it is about; Jaeger and any OTLP backend search spans by these tags. The workflow ID
already names the object a workflow owns (workflows/names.py), so the attributes are parsed
from it, and the revision from an activity's or a workflow's input where it carries one.

Workflow IDs and what they give:

| ID | attributes |
|---|---|
| `isvc/{ns}/{name}` | namespace, isvc |
| `irep/{ns}/{isvc}-{component}` | namespace, isvc, component |
| `instance/{ns}/{isvc}-{component}-{index}` | namespace, isvc, component, instance |
| `rollout/{ns}/{isvc}/{run}` | namespace, isvc |
| `migration/{ns}/{isvc}-{component}-{index}/{request}` | namespace, isvc, component, instance |
| `drain/node/{node}` | node |
| `trafficmap/{ns}/{isvc}` | namespace, isvc |

Any of the namespaced ones may carry a workload cluster suffix `@{cluster}` after the object
name (`instance/prod/chat-engine-0@worker-a`), which gives `ome.cluster`. An InferenceService
name may itself contain hyphens (`llama-3-chat-engine-0`), so the component is found as the
last `-{component}` of a known component name, not by splitting. `ome.instance` is the
Instance's name, `{isvc}-{component}-{index}`: the prefix of its pods' names.

Pure: no I/O and no Temporal, so the workflow-side interceptor may call it during replay.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from models.inferenceservice import COMPONENTS
from models.pods import LABEL_REVISION

ISVC = "ome.isvc"
COMPONENT = "ome.component"
INSTANCE = "ome.instance"
REVISION = "ome.revision"
NAMESPACE = "ome.namespace"
CLUSTER = "ome.cluster"
NODE = "ome.node"
OPERATION = "ome.operation"
"""The operation ID of a long-lived workflow's operation root (`create-1`, `update-4`)."""

_COMPONENT = "|".join(COMPONENTS)
# `{isvc}-{component}` and `{isvc}-{component}-{index}`, each optionally `@{cluster}`. The isvc
# part is greedy, so `a-engine-b-router` splits at the last known component.
_REPLICA = re.compile(rf"(?P<isvc>.+)-(?P<component>{_COMPONENT})(?:@(?P<cluster>[^/@]+))?")
_INSTANCE = re.compile(rf"(?P<isvc>.+)-(?P<component>{_COMPONENT})-(?P<index>\d+)(?:@(?P<cluster>[^/@]+))?")
_OBJECT = re.compile(r"(?P<isvc>[^/@]+)(?:@(?P<cluster>[^/@]+))?")


def _from_match(namespace: str, match: re.Match[str] | None) -> dict[str, str]:
    if match is None:
        return {NAMESPACE: namespace}
    found = {NAMESPACE: namespace, ISVC: match["isvc"]}
    groups = match.groupdict()
    if groups.get("component"):
        found[COMPONENT] = match["component"]
    if groups.get("index") is not None:
        found[INSTANCE] = f"{match['isvc']}-{match['component']}-{match['index']}"
    if groups.get("cluster"):
        found[CLUSTER] = match["cluster"]
    return found


def workflow_attributes(workflow_id: str) -> dict[str, str]:
    """The `ome.*` attributes a workflow ID names; empty for an ID of no known shape."""
    kind, _, rest = workflow_id.partition("/")
    if kind == "drain":
        scope, _, node = rest.partition("/")
        return {NODE: node} if scope == "node" and node else {}
    namespace, _, name = rest.partition("/")
    if not namespace or not name:
        return {}
    if kind in ("isvc", "trafficmap"):
        return _from_match(namespace, _OBJECT.fullmatch(name))
    if kind == "irep":
        return _from_match(namespace, _REPLICA.fullmatch(name))
    if kind == "instance":
        return _from_match(namespace, _INSTANCE.fullmatch(name))
    if kind == "rollout":
        # `{isvc}[@cluster]/{run}`
        isvc, _, run = name.rpartition("/")
        return _from_match(namespace, _OBJECT.fullmatch(isvc)) if isvc and run else {}
    if kind == "migration":
        # `{isvc}-{component}-{index}[@cluster]/{request}`
        instance, _, request = name.rpartition("/")
        return _from_match(namespace, _INSTANCE.fullmatch(instance)) if instance and request else {}
    return {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def revision_of(payload: Mapping[str, Any]) -> str | None:
    """The revision an operation's input (as plain data) is about, or None.

    Read, in order: a top-level `revision` (InstanceSpec, a migration, an InferenceReplica
    status); the canary revision of an analysis sample's template fields; the `ome.io/revision`
    label shared by every pod of a pod batch. Anything else, or pods of two revisions, names none.
    """
    if revision := _text(payload.get("revision")):
        return revision
    fields = payload.get("fields")
    if isinstance(fields, Mapping) and (revision := _text(fields.get("canary_revision"))):
        return revision
    pods = payload.get("pods")
    if isinstance(pods, list) and pods:
        labels = {_pod_revision(pod) for pod in pods}
        if len(labels) == 1:
            return labels.pop()
    return None


def _pod_revision(pod: Any) -> str | None:
    if not isinstance(pod, Mapping):
        return None
    metadata = pod.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    return _text(labels.get(LABEL_REVISION)) if isinstance(labels, Mapping) else None
