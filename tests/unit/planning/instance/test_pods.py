"""Rendering an Instance's pods, PodGroup and headless Service; in-place eligibility."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from models.instance import InstanceSpec
from models.pods import PodSummary
from planning.instance.pods import (
    PodGroupStanding,
    describe_owner,
    in_place_image_patches,
    in_place_possible,
    leader_address,
    pod_group_standing,
    pod_names,
    render_headless_service,
    render_pod_group,
    render_pods,
    still_present,
)

pytestmark = pytest.mark.unit

SCHEMA_VERSION = "1.34.0"
"""The Kubernetes schema the rendered manifests must satisfy (kubesim's kubelets run 1.33+)."""


def container(image: str = "ghcr.io/sgl/engine:1", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "engine", "image": image}
    body.update(extra)
    return body


def spec(**overrides: Any) -> InstanceSpec:
    values: dict[str, Any] = {
        "namespace": "prod",
        "isvc": "chat",
        "component": "engine",
        "index": 1,
        "revision": "7c9e1a2b",
        "leader_pod_spec": {"containers": [container()], "schedulerName": "volcano"},
    }
    values.update(overrides)
    return InstanceSpec(**values)


def gang(**overrides: Any) -> InstanceSpec:
    values: dict[str, Any] = {"worker_pod_spec": {"containers": [container()]}, "worker_count": 3}
    values.update(overrides)
    return spec(**values)


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item["value"] for item in pod["spec"]["containers"][0]["env"]}


def test_single_pod_name_role_and_ordinal() -> None:
    pods = render_pods(spec(), incarnation=1, ordinal=0)
    assert [p["metadata"]["name"] for p in pods] == ["chat-engine-1-default-0"]
    assert render_pods(spec(), 1, 1)[0]["metadata"]["name"] == "chat-engine-1-default-1"


def test_gang_names_leader_first() -> None:
    names = [p["metadata"]["name"] for p in render_pods(gang(), 2)]
    assert names == pod_names(gang())
    assert names == [
        "chat-engine-1-leader-0",
        "chat-engine-1-worker-0",
        "chat-engine-1-worker-1",
        "chat-engine-1-worker-2",
    ]


def test_labels_carry_identity_revision_incarnation_and_pairing() -> None:
    pod = render_pods(gang(pairing_protocol="nixl", labels={"team": "a"}), 4)[1]
    labels = pod["metadata"]["labels"]
    assert labels["ome.io/inferenceservice"] == "chat"
    assert labels["ome.io/component"] == "engine"
    assert labels["ome.io/instance-index"] == "1"
    assert labels["ome.io/revision"] == "7c9e1a2b"
    assert labels["ome.io/role"] == "worker"
    assert labels["ome.io/incarnation"] == "4"
    assert labels["ome.io/pairing-protocol"] == "nixl"
    assert labels["team"] == "a"
    assert labels["scheduling.x-k8s.io/pod-group"] == "chat-engine-1"


def test_no_pod_group_label_without_gang_scheduling_or_on_single_pod() -> None:
    assert (
        "scheduling.x-k8s.io/pod-group"
        not in render_pods(gang(gang_scheduling=False), 1)[0]["metadata"]["labels"]
    )
    assert "scheduling.x-k8s.io/pod-group" not in render_pods(spec(), 1)[0]["metadata"]["labels"]


def test_environment_tells_role_index_and_leader_address() -> None:
    pods = render_pods(gang(), 1)
    leader, worker = env_of(pods[0]), env_of(pods[2])
    assert leader["OME_ROLE"] == "leader" and worker["OME_ROLE"] == "worker"
    assert worker["OME_WORKER_INDEX"] == "1" and "OME_WORKER_INDEX" not in leader
    assert worker["OME_INSTANCE_INDEX"] == "1"
    assert worker["OME_LEADER_ADDRESS"] == "chat-engine-1-leader-0.chat-engine-1.prod.svc"
    assert worker["OME_WORKER_COUNT"] == "3" and worker["OME_GROUP_SIZE"] == "4"


def test_single_pod_leader_address_follows_active_ordinal() -> None:
    assert env_of(render_pods(spec(), 1, 1)[0])["OME_LEADER_ADDRESS"] == leader_address(spec(), 1)
    assert leader_address(spec(), 1).startswith("chat-engine-1-default-1.")


def test_user_env_kept_but_ours_replaces_same_name() -> None:
    user = container(env=[{"name": "OME_ROLE", "value": "bogus"}, {"name": "HF_HOME", "value": "/m"}])
    pod = render_pods(spec(leader_pod_spec={"containers": [user]}), 1)[0]
    env = pod["spec"]["containers"][0]["env"]
    assert [e["value"] for e in env if e["name"] == "OME_ROLE"] == ["default"]
    assert {"name": "HF_HOME", "value": "/m"} in env


def test_readiness_gate_hostname_subdomain_scheduler() -> None:
    body = render_pods(
        spec(leader_pod_spec={"containers": [container()], "readinessGates": [{"conditionType": "x"}]}), 1
    )[0]["spec"]
    assert body["readinessGates"] == [{"conditionType": "x"}, {"conditionType": "ome.io/serving"}]
    assert body["hostname"] == "chat-engine-1-default-0"
    assert body["subdomain"] == "chat-engine-1"
    assert render_pods(spec(), 1)[0]["spec"]["schedulerName"] == "volcano"


def test_serving_gate_not_duplicated() -> None:
    existing = {"containers": [container()], "readinessGates": [{"conditionType": "ome.io/serving"}]}
    body = render_pods(spec(leader_pod_spec=existing), 1)[0]["spec"]
    assert body["readinessGates"] == [{"conditionType": "ome.io/serving"}]


def test_worker_affinity_to_leader_domain_only_with_topology_key() -> None:
    pods = render_pods(gang(topology_key="nvidia.com/gpu.clique"), 3)
    term = pods[1]["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["topologyKey"] == "nvidia.com/gpu.clique"
    assert term["labelSelector"]["matchLabels"]["ome.io/role"] == "leader"
    assert term["labelSelector"]["matchLabels"]["ome.io/incarnation"] == "3"
    assert "affinity" not in pods[0]["spec"]
    assert "affinity" not in render_pods(gang(), 3)[1]["spec"]


def test_owner_reference_only_with_uid() -> None:
    owned = render_pods(spec(isvc_uid="uid-1"), 1)[0]["metadata"]["ownerReferences"][0]
    assert owned == {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "name": "chat",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert "ownerReferences" not in render_pods(spec(), 1)[0]["metadata"]


def test_render_does_not_mutate_input() -> None:
    source = spec()
    render_pods(source, 1)
    assert "env" not in source.leader_pod_spec["containers"][0]


@pytest.mark.parametrize(
    "instance",
    [
        pytest.param(spec(), id="single"),
        pytest.param(spec(isvc_uid="u", annotations={"a": "b"}), id="single-owned-annotated"),
        pytest.param(gang(topology_key="rack", pairing_protocol="nixl", isvc_uid="u"), id="gang-full"),
        pytest.param(
            gang(
                leader_pod_spec={
                    "containers": [container(resources={"limits": {"nvidia.com/gpu": "8"}})],
                    "nodeSelector": {"gpu": "h100"},
                    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": "topology.kubernetes.io/zone",
                            "whenUnsatisfiable": "DoNotSchedule",
                            "labelSelector": {"matchLabels": {"ome.io/component": "engine"}},
                        }
                    ],
                }
            ),
            id="gang-scheduling-fields",
        ),
    ],
)
def test_rendered_pods_validate_strictly(instance: InstanceSpec) -> None:
    for pod in render_pods(instance, 2, 0):
        kubernetes_validate.validate(pod, SCHEMA_VERSION, strict=True)
    kubernetes_validate.validate(render_headless_service(instance), SCHEMA_VERSION, strict=True)


def test_pod_group_for_gang_only() -> None:
    group = render_pod_group(gang(instance_ready_timeout_seconds=2700.0))
    assert group is not None
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert group["metadata"]["name"] == "chat-engine-1"
    assert group["spec"] == {"minMember": 4, "scheduleTimeoutSeconds": 2700}
    assert render_pod_group(spec()) is None
    assert render_pod_group(gang(gang_scheduling=False)) is None
    no_timeout = render_pod_group(gang(instance_ready_timeout_seconds=None))
    assert no_timeout is not None and "scheduleTimeoutSeconds" not in no_timeout["spec"]


def test_headless_service_publishes_not_ready_addresses() -> None:
    service = render_headless_service(gang())
    assert service["metadata"]["name"] == "chat-engine-1"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"]["ome.io/instance-index"] == "1"


@pytest.mark.parametrize(
    ("change", "possible"),
    [
        pytest.param({}, True, id="identical"),
        pytest.param(
            {"leader_pod_spec": {"containers": [container("img:2")], "schedulerName": "volcano"}},
            True,
            id="image-only",
        ),
        pytest.param(
            {"leader_pod_spec": {"containers": [container(args=["--tp", "8"])], "schedulerName": "volcano"}},
            False,
            id="args",
        ),
        pytest.param({"leader_pod_spec": {"containers": [container()]}}, False, id="scheduler-name"),
        pytest.param({"labels": {"x": "y"}}, False, id="labels"),
        pytest.param(
            {
                "leader_pod_spec": {
                    "containers": [container()],
                    "initContainers": [container("init:2")],
                    "schedulerName": "volcano",
                }
            },
            False,
            id="init-container",
        ),
    ],
)
def test_in_place_possible(change: dict[str, Any], possible: bool) -> None:
    assert in_place_possible(spec(), spec(revision="new", **change)) is possible


def test_in_place_worker_count_change_is_not_in_place() -> None:
    assert not in_place_possible(gang(), gang(worker_count=2))
    assert in_place_possible(gang(), gang(revision="b", worker_pod_spec={"containers": [container("img:9")]}))


def test_in_place_patches_name_every_pod_with_images_and_revision() -> None:
    new = gang(revision="b", worker_pod_spec={"containers": [container("img:9")]})
    patches = in_place_image_patches(new, 2)
    assert sorted(patches) == sorted(pod_names(new))
    assert patches["chat-engine-1-worker-2"] == {
        "metadata": {"labels": {"ome.io/revision": "b"}},
        "spec": {"containers": [{"name": "engine", "image": "img:9"}]},
    }


def test_workers_need_a_spec() -> None:
    with pytest.raises(ValueError, match="worker_pod_spec must be set when worker_count is 2"):
        spec(worker_count=2)


# --- whose PodGroup holds the name ---------------------------------------------------------

OURS_LABELS = {"ome.io/inferenceservice": "chat", "ome.io/component": "engine", "ome.io/instance-index": "1"}
OUR_OWNER = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "name": "chat", "uid": "u-1"}


def found_group(**metadata: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "chat-engine-1", "namespace": "prod", "labels": dict(OURS_LABELS)}
    meta.update(metadata)
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": meta}


@pytest.mark.parametrize(
    ("uid", "found", "standing"),
    [
        ("u-1", None, PodGroupStanding.ABSENT),
        ("u-1", found_group(ownerReferences=[OUR_OWNER]), PodGroupStanding.OURS),
        (None, found_group(), PodGroupStanding.OURS),
        (None, found_group(ownerReferences=[OUR_OWNER]), PodGroupStanding.OURS),
        # Terminating wins whoever owns it: the name frees when it goes.
        ("u-1", found_group(deletionTimestamp="2026-01-01T00:00:00Z"), PodGroupStanding.TERMINATING),
        (
            "u-1",
            found_group(labels={}, deletionTimestamp="2026-01-01T00:00:00Z"),
            PodGroupStanding.TERMINATING,
        ),
        # An InferenceService of the same name recreated: the old owner's uid is not ours.
        ("u-1", found_group(ownerReferences=[{**OUR_OWNER, "uid": "u-0"}]), PodGroupStanding.TAKEN),
        ("u-1", found_group(), PodGroupStanding.OURS),  # made before the uid was known
        (None, found_group(ownerReferences=[{**OUR_OWNER, "name": "other"}]), PodGroupStanding.TAKEN),
        (
            None,
            found_group(ownerReferences=[{"kind": "Job", "name": "chat", "uid": "j"}]),
            PodGroupStanding.TAKEN,
        ),
        ("u-1", found_group(labels={}, ownerReferences=[OUR_OWNER]), PodGroupStanding.TAKEN),
        (None, found_group(labels={**OURS_LABELS, "ome.io/instance-index": "2"}), PodGroupStanding.TAKEN),
    ],
)
def test_pod_group_standing(
    uid: str | None, found: dict[str, Any] | None, standing: PodGroupStanding
) -> None:
    assert pod_group_standing(gang(isvc_uid=uid), found) == standing


def test_describe_owner_names_owner_or_labels() -> None:
    assert describe_owner(found_group(ownerReferences=[OUR_OWNER])) == "InferenceService chat (uid u-1)"
    assert describe_owner(found_group(labels={"team": "x"})) == "no owner reference (labels: team=x)"
    assert describe_owner(found_group(labels={})) == "no owner reference (labels: none)"


@pytest.mark.parametrize(
    ("observed", "targets", "present"),
    [
        ([], {"p-0": "u0"}, []),
        ([("p-0", "u0")], {"p-0": "u0"}, ["p-0"]),
        # The name holds another pod now: the one we deleted is gone.
        ([("p-0", "u9")], {"p-0": "u0"}, []),
        # No uid known: any pod of that name counts.
        ([("p-0", "u9")], {"p-0": ""}, ["p-0"]),
        ([("p-1", "u1"), ("p-0", "u0")], {"p-1": "u1", "p-0": "u0", "p-2": "u2"}, ["p-0", "p-1"]),
    ],
)
def test_still_present_matches_name_and_uid(
    observed: list[tuple[str, str]], targets: dict[str, str], present: list[str]
) -> None:
    pods = [pod_summary(name, uid) for name, uid in observed]
    assert still_present(pods, targets) == present


def pod_summary(name: str, uid: str) -> PodSummary:
    return PodSummary(name=name, uid=uid, scheduled=True, node_name="n1", node_ready="True")
