"""How the InferenceReplica's state crosses continue-as-new (`workflows.replica.carry`): as it
is while small, packed above `PACKED_ABOVE`, and the same state on the other side either way,
through the worker's own data converter."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tests.unit.replica_rows import ready_report, replica_config
from workers.client import DATA_CONVERTER
from workflows.replica.carry import PACKED_ABOVE, PackedReplicaState, carried, unpacked
from workflows.replica.messages import ReplicaConfig, ReplicaState

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
REVISION = "bbbbbbbb"
CONVERTER = DATA_CONVERTER.payload_converter
BLOB_SIZE_ERROR = 2 * 1024 * 1024
"""The server's `limit.blobSize.error`: a continue-as-new input above it is refused."""


def state(instances: int) -> ReplicaState:
    reports = {index: ready_report(index, REVISION, NOW) for index in range(instances)}
    return ReplicaState(config=replica_config(REVISION), instances=reports, last_desired=instances)


def size(value: object) -> int:
    return len(CONVERTER.to_payloads([value])[0].data)


def run_input(value: object) -> ReplicaConfig | ReplicaState | PackedReplicaState:
    """What the next run's `run` argument decodes to, as the worker decodes it."""
    [decoded] = CONVERTER.from_payloads(CONVERTER.to_payloads([value]), [ReplicaConfig | ReplicaState | PackedReplicaState])
    return decoded  # type: ignore[no-any-return]


@pytest.mark.parametrize("instances", [0, 2, 5000])
def test_the_state_arrives_whole(instances: int) -> None:
    sent = state(instances)
    arrived = run_input(carried(sent, CONVERTER))
    assert not isinstance(arrived, ReplicaConfig)
    assert unpacked(arrived, CONVERTER) == sent


def test_a_small_state_goes_as_it_is() -> None:
    small = state(2)
    assert carried(small, CONVERTER) is small  # readable in the UI's start event


def test_a_big_state_goes_packed_far_under_the_servers_limit() -> None:
    big = state(5000)
    assert size(big) > BLOB_SIZE_ERROR  # 5,000 Instances' rows: the server would refuse it as it is
    packed = carried(big, CONVERTER)
    assert isinstance(packed, PackedReplicaState)
    assert size(packed) < PACKED_ABOVE
    assert json.loads(CONVERTER.to_payloads([packed])[0].data).keys() == {"packed_state", "encoding"}
