"""The `migrate` Update's refusal types (workflows.service.migrations.checked): a bad field is
`MigrationRequestRejected` (omectl exits 1), the service's state `MigrationPreconditionConflict`
(omectl exits 3, spec reference §3.3 and §13). Pure: no server."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from workflows.service.messages import MIGRATION_CONFLICT, MIGRATION_REJECTED, ServiceState
from workflows.service.migrations import checked

REQUEST = {"component": "engine", "instance": 0, "from_node": "gpu-node-1"}


@pytest.mark.parametrize(
    ("state", "request_", "expected"),
    [
        ({"modes": {"engine": "OMENative"}}, {**REQUEST, "instance": -1}, MIGRATION_REJECTED),
        ({"modes": {"engine": "OMENative"}}, {**REQUEST, "component": "decoder"}, MIGRATION_REJECTED),
        ({"modes": {"engine": "RawDeployment"}}, REQUEST, MIGRATION_CONFLICT),
        ({"modes": {}}, REQUEST, MIGRATION_CONFLICT),
        ({"modes": {"engine": "OMENative"}, "deleting": True}, REQUEST, MIGRATION_CONFLICT),
    ],
    ids=["bad-field", "no-such-component", "not-omenative", "not-planned-yet", "deleting"],
)
def test_refusal_type(state: dict[str, Any], request_: dict[str, Any], expected: str) -> None:
    with pytest.raises(ApplicationError) as refused:
        checked(ServiceState.model_validate({"manifest": {}, **state}), request_)
    assert refused.value.type == expected
    assert refused.value.message.startswith("migration request")


def test_a_valid_request_passes() -> None:
    assert checked(ServiceState.model_validate({"manifest": {}, "modes": {"engine": "OMENative"}}), REQUEST).component == "engine"
