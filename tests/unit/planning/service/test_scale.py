"""The `scale` signal's verdict and the words of a refusal (`planning.service.scale`)."""

from __future__ import annotations

import pytest

from planning.service.scale import ScalableComponent, check_scale, forward_refusal

pytestmark = pytest.mark.unit

COMPONENTS = {
    "engine": ScalableComponent(mode="OMENative", min_replicas=1, max_replicas=4),
    "router": ScalableComponent(mode="RawDeployment", min_replicas=0, max_replicas=None),
    "decoder": ScalableComponent(mode="MultiNode", min_replicas=1, max_replicas=2),
}


@pytest.mark.parametrize(
    ("component", "replicas", "expected"),
    [
        ("engine", 1, 1),
        ("engine", 4, 4),
        ("engine", 3, 3),
        ("router", 0, 0),
        ("router", 500, 500),
    ],
)
def test_accepted(component: str, replicas: int, expected: int) -> None:
    verdict = check_scale(component, replicas, COMPONENTS)
    assert verdict.accepted and verdict.replicas == expected and verdict.message == ""


@pytest.mark.parametrize(
    ("component", "replicas", "message"),
    [
        (
            "engine",
            -3,
            "scale refused: replicas=-3 for component engine must be an integer >= 0 within "
            "minReplicas..maxReplicas (1..4); send a value in range or change minReplicas/maxReplicas "
            "with apply",
        ),
        (
            "engine",
            5,
            "scale refused: replicas=5 for component engine must be an integer >= 0 within "
            "minReplicas..maxReplicas (1..4)",
        ),
        ("engine", 0, "replicas=0 for component engine"),
        ("engine", 2.5, "replicas=2.5 for component engine must be an integer"),
        ("engine", "3", "replicas='3' for component engine must be an integer"),
        ("engine", True, "replicas=True"),
        ("engine", None, "replicas=None"),
        ("router", -1, "within minReplicas..maxReplicas (0..no maximum)"),
    ],
)
def test_refused_replicas_name_field_value_and_fix(component: str, replicas: object, message: str) -> None:
    verdict = check_scale(component, replicas, COMPONENTS)
    assert not verdict.accepted and verdict.replicas is None
    assert message in verdict.message
    assert verdict.message.endswith("send a value in range or change minReplicas/maxReplicas with apply")


def test_refused_unknown_component_lists_the_real_ones() -> None:
    verdict = check_scale("decodr", 2, COMPONENTS)
    assert not verdict.accepted
    assert verdict.message == (
        "scale refused: component='decodr' is not a component of this InferenceService "
        "(components: decoder, engine, router); send the scale to one of them, or add spec.decodr with apply"
    )


def test_refused_before_any_component_is_known() -> None:
    assert "(components: none yet)" in check_scale("engine", 2, {}).message


def test_refused_multinode_component_says_how_to_run_it() -> None:
    verdict = check_scale("decoder", 2, COMPONENTS)
    assert not verdict.accepted
    assert verdict.message.startswith("scale refused: component decoder runs in MultiNode mode")
    assert 'remove spec.decoder.annotations["ome.io/deploymentMode"] with apply' in verdict.message


MODES = {"engine": "OMENative", "router": "RawDeployment"}


def test_forwarded_signal_to_an_omenative_component_passes() -> None:
    assert forward_refusal("release_held", "engine", MODES) is None


def test_forwarded_signal_to_a_deployment_says_it_has_no_inference_replica() -> None:
    message = forward_refusal("reset_instances", "router", MODES)
    assert message == (
        "reset_instances refused: component router runs in RawDeployment mode, which has no "
        "InferenceReplica with Instances to reset; reset_instances applies to OMENative components "
        'only (set spec.router.annotations["ome.io/deploymentMode"] to OMENative with apply to use it)'
    )


def test_forwarded_signal_to_an_unknown_component_lists_the_real_ones() -> None:
    message = forward_refusal("release_held", "decoder", MODES)
    assert message == (
        "release_held refused: component='decoder' is not a component of this InferenceService "
        "(components: engine, router); send it to one of them"
    )
