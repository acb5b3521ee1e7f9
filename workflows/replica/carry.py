"""How the InferenceReplica's state crosses continue-as-new when it is big.

The state carries a row per Instance (about 635 bytes of JSON each: 1.27 MB for a component
of 2,000), and the server refuses a continue-as-new whose input passes `limit.blobSize.error`
(2 MB by default, on Temporal Cloud too), so a component of some 3,200 Instances could not
hand over. Above `PACKED_ABOVE` bytes the state goes over zlib-compressed instead
(`PackedReplicaState`): the rows are much alike, and 2,000 of them pack into a few percent
of that. Smaller states go as they are, readable in the UI's start event.

Imported by the workflow module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

import base64
import zlib

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadConverter

from models.base import MessageModel
from workflows.replica.messages import ReplicaState

PACKED_ABOVE = 512 * 1024
"""State JSON larger than this crosses continue-as-new packed (the server's own warning limit
for one payload, `limit.blobSize.warn`)."""


class PackedReplicaState(MessageModel):
    """A `ReplicaState` as its payload's data, zlib-compressed and base64-encoded, with the
    payload's encoding (what the data converter needs to read it back)."""

    packed_state: str
    encoding: str


def carried(state: ReplicaState, converter: PayloadConverter) -> ReplicaState | PackedReplicaState:
    """What continue-as-new hands the next run: `state`, or `state` packed when it is big."""
    [payload] = converter.to_payloads([state])
    if len(payload.data) <= PACKED_ABOVE:
        return state
    return PackedReplicaState(
        packed_state=base64.b64encode(zlib.compress(payload.data, 6)).decode("ascii"),
        encoding=payload.metadata["encoding"].decode(),
    )


def unpacked(arg: ReplicaState | PackedReplicaState, converter: PayloadConverter) -> ReplicaState:
    """The state a run was handed, unpacked when it came packed."""
    if isinstance(arg, ReplicaState):
        return arg
    payload = Payload(metadata={"encoding": arg.encoding.encode()}, data=zlib.decompress(base64.b64decode(arg.packed_state)))
    [state] = converter.from_payloads([payload], [ReplicaState])
    if not isinstance(state, ReplicaState):
        raise TypeError(f"a packed InferenceReplica state unpacked to {type(state).__name__}")
    return state
