"""What is on the node, sorted by what a drain does with it.

- An OMENative Instance's pods (labels `ome.io/inferenceservice`, `ome.io/component` and
  `ome.io/instance-index`) are moved by migrating their Instance, replacement first: evicting
  one pod of a gang would leave the Instance broken.
- The product's other pods (an `ome.io/inferenceservice` label without an Instance index,
  e.g. a RawDeployment component's Deployment pods) are evicted through the Eviction API,
  which respects their PodDisruptionBudgets.
- Pods already terminating are on their way out: counted as left, nothing is done to them.
- Everything else (DaemonSets, other teams' workloads) is left alone and reported, as
  `kubectl drain` leaves DaemonSet pods; so is a product pod a DaemonSet owns, which would
  come straight back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from models.kube_ops import NodePod
from models.pods import LABEL_COMPONENT, LABEL_INSTANCE_INDEX, LABEL_ISVC
from planning.drain.state import InstanceKey

DAEMONSET = "DaemonSet"


@dataclass(frozen=True)
class NodeContents:
    instances: dict[InstanceKey, list[NodePod]] = field(default_factory=dict)
    evict: list[NodePod] = field(default_factory=list)
    terminating: list[NodePod] = field(default_factory=list)
    """The product's pods already on their way out."""
    ignored: list[NodePod] = field(default_factory=list)

    @property
    def product_pods(self) -> list[str]:
        """Every product pod on the node (`ns/name`), sorted."""
        keys = [p.key for pods in self.instances.values() for p in pods]
        keys += [p.key for p in self.evict] + [p.key for p in self.terminating]
        return sorted(keys)


def instance_of(pod: NodePod) -> InstanceKey | None:
    """The Instance `pod` belongs to; None for a pod that is not an OMENative Instance's."""
    labels = pod.labels
    index = labels.get(LABEL_INSTANCE_INDEX, "")
    if not labels.get(LABEL_ISVC) or not labels.get(LABEL_COMPONENT) or not index.isdigit():
        return None
    return InstanceKey(
        namespace=pod.namespace, isvc=labels[LABEL_ISVC], component=labels[LABEL_COMPONENT], index=int(index)
    )


def classify(pods: list[NodePod]) -> NodeContents:
    instances: dict[InstanceKey, list[NodePod]] = {}
    evict: list[NodePod] = []
    terminating: list[NodePod] = []
    ignored: list[NodePod] = []
    for pod in sorted(pods, key=lambda p: p.key):
        if not pod.labels.get(LABEL_ISVC) or pod.owner_kind == DAEMONSET:
            ignored.append(pod)
        elif pod.terminating:
            terminating.append(pod)
        elif (key := instance_of(pod)) is not None:
            instances.setdefault(key, []).append(pod)
        else:
            evict.append(pod)
    return NodeContents(instances=instances, evict=evict, terminating=terminating, ignored=ignored)
