"""Table tests of `kubesim.quota_usage`: which quota names count pods, what a pod uses, which
containers a cpu or memory quota finds wanting, and how an amount prints."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from kubesim.quota_usage import Quantity, is_extended, matching, missing, pod_usage, total

pytestmark = pytest.mark.kubesim


@pytest.mark.parametrize(
    ("written", "summed_with", "prints"),
    [
        ("8", None, "8"),
        ("1000", None, "1k"),
        ("1500", None, "1500"),
        ("500m", "500m", "1"),
        ("1.5", None, "1500m"),
        ("250m", "1", "1250m"),
        ("16Gi", "16Gi", "32Gi"),
        ("1536Mi", None, "1536Mi"),
        ("1Gi", "512Mi", "1536Mi"),
        ("0", "16Gi", "16Gi"),  # a zero takes the other's form
        ("1G", "1Gi", "2073741824"),  # decimal first: the sum prints decimal
        ("512Ki", "100", "524388"),
        ("0", None, "0"),
    ],
)
def test_an_amount_prints_in_the_form_of_what_it_was_summed_from(
    written: str, summed_with: str | None, prints: str
) -> None:
    amount = Quantity.parse(written)
    if summed_with is not None:
        amount = amount + Quantity.parse(summed_with)
    assert str(amount) == prints


@pytest.mark.parametrize(
    ("name", "counts_pods"),
    [
        ("pods", True),
        ("count/pods", True),
        ("cpu", True),
        ("requests.memory", True),
        ("limits.ephemeral-storage", True),
        ("requests.nvidia.com/gpu", True),
        ("requests.hugepages-2Mi", True),
        ("hugepages-1Gi", True),
        ("nvidia.com/gpu", False),  # an extended resource is quota'd as requests.<name> only
        ("limits.nvidia.com/gpu", False),
        ("requests.kubernetes.io/something", False),
        ("services", False),
        ("count/configmaps", False),
        ("requests.storage", False),  # a claim's, not a pod's
    ],
)
def test_the_names_that_count_pods(name: str, counts_pods: bool) -> None:
    assert matching(name) is counts_pods


def test_an_extended_resource_has_a_domain_outside_kubernetes_io() -> None:
    assert is_extended("nvidia.com/gpu") and is_extended("example.com/foo")
    assert not is_extended("cpu") and not is_extended("kubernetes.io/x") and not is_extended("requests.a.com/b")


def container(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": name, "image": "img:1", "resources": resources}


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (), **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"containers": list(containers), "initContainers": list(init), **spec}}


def shown(usage: dict[str, Quantity]) -> dict[str, str]:
    return {name: str(amount) for name, amount in usage.items()}


def test_a_pod_uses_its_containers_summed_an_init_container_where_larger_and_its_overhead() -> None:
    engine = container("engine", {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "8"},
                       {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8"})
    sidecar = container("proxy", {"cpu": "500m", "memory": "512Mi"})
    loader = container("loader", {"cpu": "6", "memory": "1Gi"})
    usage = pod_usage(pod(engine, sidecar, init=(loader,), overhead={"cpu": "250m"}), counts=True)
    assert shown(usage) == {
        "count/pods": "1",
        "pods": "1",
        "cpu": "6250m",  # the init container's 6 beats 4.5, then the overhead
        "requests.cpu": "6250m",
        "limits.cpu": "8250m",
        "memory": "33280Mi",
        "requests.memory": "33280Mi",
        "limits.memory": "32Gi",
        "requests.nvidia.com/gpu": "8",
    }


def test_a_pod_that_does_not_count_uses_only_its_place_in_storage() -> None:
    assert shown(pod_usage(pod(container("c", {"cpu": "1"})), counts=False)) == {"count/pods": "1"}


def test_usages_sum_by_name() -> None:
    one = pod_usage(pod(container("c", {"nvidia.com/gpu": "8"})), counts=True)
    done = pod_usage(pod(container("c", {"nvidia.com/gpu": "8"})), counts=False)
    assert shown(total([one, one, done])) == {"count/pods": "3", "pods": "2", "requests.nvidia.com/gpu": "16"}
    assert total([]) == {}
    assert Quantity.parse("16").amount == Decimal(16)


@pytest.mark.parametrize(
    ("limited", "absent"),
    [
        (["pods", "requests.nvidia.com/gpu"], {}),  # only cpu and memory are required of containers
        (["requests.cpu"], {"requests.cpu": ["init", "plain"]}),
        (["cpu", "limits.memory"], {"cpu": ["init", "plain"], "limits.memory": ["init", "plain", "sized"]}),
        (["limits.cpu"], {"limits.cpu": ["init", "plain", "sized"]}),
    ],
)
def test_a_cpu_or_memory_quota_finds_the_containers_that_do_not_state_it(
    limited: list[str], absent: dict[str, list[str]]
) -> None:
    spec = pod(container("sized", {"cpu": "1", "memory": "1Gi"}), container("plain"), init=(container("init"),))["spec"]
    assert missing(spec, limited) == absent
