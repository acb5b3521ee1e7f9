"""Matching rules the kubesim scheduler shares between its plugins.

Label selectors, node selector terms, taints and tolerations, resource quantities and a
pod's effective requests, each written to the semantics of the Kubernetes API helpers
the real kube-scheduler calls (component-helpers, apimachinery labels, v1 helpers), so a
pod that is pending in kubesim would be pending on a real cluster for the same reason.
Everything here is pure and works on the JSON dicts the API server stores.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

JSON = dict[str, Any]

UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
NOT_READY_TAINT_KEY = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT_KEY = "node.kubernetes.io/unreachable"

# Requests the scheduler assumes for scoring when a container sets none, so that
# request-less pods still spread out (pkg/scheduler/util: DefaultMilliCPURequest and
# DefaultMemoryRequest).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024


def mapping(value: object) -> JSON:
    """`value` if it is a JSON object, else an empty one: absent fields read as empty."""
    return value if isinstance(value, dict) else {}


def sequence(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in mapping(mapping(obj.get("metadata")).get("labels")).items()}


def name_of(obj: Mapping[str, Any]) -> str:
    return str(mapping(obj.get("metadata")).get("name", ""))


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str(mapping(obj.get("metadata")).get("namespace") or "default")


def is_terminating(pod: Mapping[str, Any]) -> bool:
    return bool(mapping(pod.get("metadata")).get("deletionTimestamp"))


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders gpu-node-2 before gpu-node-10, so ties break the way people read."""
    parts = re.split(r"(\d+)", name)
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in parts if part)


# Label selectors (metav1.LabelSelector) ------------------------------------------------


def _requirement_matches(labels: Mapping[str, str], key: str, operator: str, values: list[str]) -> bool:
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        # An absent key satisfies NotIn, exactly as in apimachinery's labels package.
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    return False


def selector_matches(selector: object, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: None selects nothing, {} selects everything."""
    if not isinstance(selector, dict):
        return False
    for key, value in mapping(selector.get("matchLabels")).items():
        if labels.get(str(key)) != str(value):
            return False
    for expression in sequence(selector.get("matchExpressions")):
        expression = mapping(expression)
        values = [str(v) for v in sequence(expression.get("values"))]
        if not _requirement_matches(labels, str(expression.get("key", "")), str(expression.get("operator", "")), values):
            return False
    return True


def selector_is_empty(selector: object) -> bool:
    """True for `{}`: a selector that matches everything (and so counts nothing in spreading)."""
    return (
        isinstance(selector, dict)
        and not mapping(selector.get("matchLabels"))
        and not sequence(selector.get("matchExpressions"))
    )


def with_label_keys(
    selector: object, pod_labels: Mapping[str, str], match_keys: Iterable[str], mismatch_keys: Iterable[str] = ()
) -> object:
    """Merge matchLabelKeys (key In value) and mismatchLabelKeys (key NotIn value) into a selector.

    Keys the incoming pod lacks are ignored, as kube-apiserver and the scheduler do.
    """
    extra: list[JSON] = []
    for key in match_keys:
        if key in pod_labels:
            extra.append({"key": key, "operator": "In", "values": [pod_labels[key]]})
    for key in mismatch_keys:
        if key in pod_labels:
            extra.append({"key": key, "operator": "NotIn", "values": [pod_labels[key]]})
    if not extra or not isinstance(selector, dict):
        return selector
    merged = dict(selector)
    merged["matchExpressions"] = list(sequence(selector.get("matchExpressions"))) + extra
    return merged


# Node selectors and node affinity ------------------------------------------------------


def _node_requirement_matches(values: Mapping[str, str], expression: JSON) -> bool:
    key = str(expression.get("key", ""))
    operator = str(expression.get("operator", ""))
    expected = [str(v) for v in sequence(expression.get("values"))]
    if operator in ("Gt", "Lt"):
        if key not in values or len(expected) != 1:
            return False
        try:
            actual, bound = int(values[key]), int(expected[0])
        except ValueError:
            return False
        return actual > bound if operator == "Gt" else actual < bound
    return _requirement_matches(values, key, operator, expected)


def node_selector_term_matches(term: object, node: Mapping[str, Any]) -> bool:
    """One NodeSelectorTerm: matchExpressions and matchFields ANDed; an empty term matches nothing."""
    term = mapping(term)
    expressions = [mapping(e) for e in sequence(term.get("matchExpressions"))]
    fields = [mapping(f) for f in sequence(term.get("matchFields"))]
    if not expressions and not fields:
        return False
    labels = labels_of(node)
    if not all(_node_requirement_matches(labels, expression) for expression in expressions):
        return False
    # metadata.name is the only field selector the API accepts in matchFields.
    node_fields = {"metadata.name": name_of(node)}
    return all(
        str(field.get("key")) == "metadata.name" and _node_requirement_matches(node_fields, field) for field in fields
    )


def required_node_affinity(pod: Mapping[str, Any]) -> JSON | None:
    affinity = mapping(mapping(mapping(pod.get("spec")).get("affinity")).get("nodeAffinity"))
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    return required if isinstance(required, dict) else None


def pod_matches_node_selector_and_affinity(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """The NodeAffinity filter: spec.nodeSelector AND (nodeSelectorTerms ORed)."""
    labels = labels_of(node)
    for key, value in mapping(mapping(pod.get("spec")).get("nodeSelector")).items():
        if labels.get(str(key)) != str(value):
            return False
    required = required_node_affinity(pod)
    if required is None:
        return True
    return any(node_selector_term_matches(term, node) for term in sequence(required.get("nodeSelectorTerms")))


# Taints and tolerations ----------------------------------------------------------------


def toleration_tolerates(toleration: object, taint: Mapping[str, Any]) -> bool:
    toleration = mapping(toleration)
    effect = str(toleration.get("effect") or "")
    if effect and effect != str(taint.get("effect", "")):
        return False
    key = str(toleration.get("key") or "")
    if key and key != str(taint.get("key", "")):
        return False
    operator = str(toleration.get("operator") or "Equal")
    if operator == "Exists":
        return True
    if operator == "Equal":
        return str(toleration.get("value") or "") == str(taint.get("value") or "")
    return False


def tolerates(tolerations: Iterable[object], taint: Mapping[str, Any]) -> bool:
    return any(toleration_tolerates(toleration, taint) for toleration in tolerations)


def pod_tolerations(pod: Mapping[str, Any]) -> list[Any]:
    return sequence(mapping(pod.get("spec")).get("tolerations"))


def ready_status(node: Mapping[str, Any]) -> str:
    """The Ready condition's status; "" when the kubelet has not reported one."""
    for condition in sequence(mapping(node.get("status")).get("conditions")):
        condition = mapping(condition)
        if condition.get("type") == "Ready":
            return str(condition.get("status", ""))
    return ""


def effective_taints(node: Mapping[str, Any]) -> list[JSON]:
    """The node's taints plus those the node lifecycle controller would add for a node that
    is not Ready, so a not-ready node repels pods whether or not a controller ran yet."""
    taints = [mapping(t) for t in sequence(mapping(node.get("spec")).get("taints"))]
    status = ready_status(node)
    if status != "True":
        key = NOT_READY_TAINT_KEY if status in ("False", "") else UNREACHABLE_TAINT_KEY
        if not any(t.get("key") == key and t.get("effect") == "NoSchedule" for t in taints):
            taints.append({"key": key, "effect": "NoSchedule"})
    return taints


def first_untolerated_taint(pod: Mapping[str, Any], node: Mapping[str, Any], effects: tuple[str, ...]) -> JSON | None:
    tolerations = pod_tolerations(pod)
    for taint in effective_taints(node):
        if str(taint.get("effect", "")) in effects and not tolerates(tolerations, taint):
            return taint
    return None


# Quantities and requests ---------------------------------------------------------------

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": Decimal(10**3),
            "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12), "P": Decimal(10**15),
            "E": Decimal(10**18)}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")


class QuantityError(ValueError):
    """A resource quantity that Kubernetes would reject."""


def parse_quantity(value: object) -> Decimal:
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(f'resource quantity "{value}" is not a Kubernetes quantity; use e.g. "500m", "8", "16Gi"')
    try:
        number = Decimal(match.group(1))
    except InvalidOperation:
        raise QuantityError(f'resource quantity "{value}" is not a number') from None
    suffix = match.group(2)
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix:
        return number * _DECIMAL[suffix]
    return number


def resource_amount(resource: str, value: object) -> int:
    """Integer amount in the unit the scheduler compares: millicores for cpu, whole units
    (bytes, devices) for everything else, rounded up as Quantity.Value() does."""
    quantity = parse_quantity(value)
    if resource == "cpu":
        return math.ceil(quantity * 1000)
    return math.ceil(quantity)


def resource_list(values: object) -> dict[str, int]:
    return {str(k): resource_amount(str(k), v) for k, v in mapping(values).items()}


def _add(total: dict[str, int], extra: Mapping[str, int]) -> dict[str, int]:
    result = dict(total)
    for key, amount in extra.items():
        result[key] = result.get(key, 0) + amount
    return result


def _maximum(left: Mapping[str, int], right: Mapping[str, int]) -> dict[str, int]:
    result = dict(left)
    for key, amount in right.items():
        result[key] = max(result.get(key, 0), amount)
    return result


def _container_requests(container: object, non_zero: bool) -> dict[str, int]:
    requests = resource_list(mapping(mapping(container).get("resources")).get("requests"))
    if non_zero:
        requests.setdefault("cpu", DEFAULT_MILLI_CPU_REQUEST)
        requests.setdefault("memory", DEFAULT_MEMORY_REQUEST)
        if requests["cpu"] == 0:
            requests["cpu"] = DEFAULT_MILLI_CPU_REQUEST
        if requests["memory"] == 0:
            requests["memory"] = DEFAULT_MEMORY_REQUEST
    return requests


def pod_requests(pod: Mapping[str, Any], non_zero: bool = False) -> dict[str, int]:
    """What the pod reserves on a node, as component-helpers' PodRequests computes it.

    App containers add up; sidecars (init containers with restartPolicy Always) run beside
    them and add too; each ordinary init container runs alone after the sidecars started
    before it, so the pod needs the larger of the two phases; overhead comes on top.
    `non_zero` substitutes the scheduler's defaults for missing cpu/memory (scoring only).
    """
    spec = mapping(pod.get("spec"))
    total: dict[str, int] = {}
    for container in sequence(spec.get("containers")):
        total = _add(total, _container_requests(container, non_zero))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in sequence(spec.get("initContainers")):
        requests = _container_requests(container, non_zero)
        if mapping(container).get("restartPolicy") == "Always":
            total = _add(total, requests)
            sidecars = _add(sidecars, requests)
            phase = sidecars
        else:
            phase = _add(requests, sidecars)
        init_peak = _maximum(init_peak, phase)
    total = _maximum(total, init_peak)
    return _add(total, resource_list(spec.get("overhead")))
