"""Regenerates `kubesim/k8s_protobuf.json`, the field table `kubesim.protobuf` decodes request
bodies with: the field numbers, JSON names, wire types and pointer-ness of the Kubernetes
messages reachable from the kinds kubesim serves.

Go clients (kubectl's `create` commands, controllers, helm) register each API package's
`generated.proto` descriptor, gzipped, in their binary; this reads them from such a binary, so the
table matches what the client really sends:

    python -m kubesim.proto_gen /usr/lib/google-cloud-sdk/bin/kubectl.1.32 > kubesim/k8s_protobuf.json

Dev-time only (it needs the `protobuf` package); the server reads just the JSON it writes.
"""

from __future__ import annotations

import json
import re
import sys
import zlib
from typing import Any

from google.protobuf import descriptor_pb2

# The messages a client can send kubesim: its built-in kinds, plus request bodies (DeleteOptions,
# Eviction, Binding, Scale).
ROOTS = [
    "k8s.io.api.core.v1." + kind
    for kind in ("Namespace", "Node", "Pod", "Service", "Endpoints", "ConfigMap", "Secret", "ServiceAccount",
                 "Event", "Binding", "ResourceQuota")
] + [
    "k8s.io.api.apps.v1.Deployment", "k8s.io.api.apps.v1.ReplicaSet",
    "k8s.io.api.discovery.v1.EndpointSlice", "k8s.io.api.policy.v1.PodDisruptionBudget",
    "k8s.io.api.policy.v1.Eviction", "k8s.io.api.coordination.v1.Lease", "k8s.io.api.autoscaling.v1.Scale",
    "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
]
_TYPES = {
    descriptor_pb2.FieldDescriptorProto.TYPE_STRING: "string",
    descriptor_pb2.FieldDescriptorProto.TYPE_BYTES: "bytes",
    descriptor_pb2.FieldDescriptorProto.TYPE_BOOL: "bool",
    descriptor_pb2.FieldDescriptorProto.TYPE_INT32: "int",
    descriptor_pb2.FieldDescriptorProto.TYPE_INT64: "int",
    descriptor_pb2.FieldDescriptorProto.TYPE_UINT32: "int",
    descriptor_pb2.FieldDescriptorProto.TYPE_UINT64: "int",
    descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE: "double",
    descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT: "float",
    descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE: "message",
}
# gogoproto.nullable=false (extension 65001, varint 0) marks a Go value, not a pointer.
_NOT_NULLABLE = bytes.fromhex("c8de1f00")


def descriptors(binary: bytes) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """Every gzipped `generated.proto` FileDescriptorProto embedded in a Go binary."""
    found: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for match in re.finditer(b"\x1f\x8b\x08\x00\x00\x00\x00\x00", binary):
        try:
            raw = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(binary[match.start():match.start() + 4_000_000])
        except zlib.error:
            continue
        if b"generated.proto" not in raw[:200]:
            continue
        fd = descriptor_pb2.FileDescriptorProto()
        try:
            fd.ParseFromString(raw)
        except Exception:  # noqa: BLE001 - a gzip stream that is not a descriptor
            continue
        found[fd.name] = fd
    return found


def _messages(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> dict[str, descriptor_pb2.DescriptorProto]:
    out: dict[str, descriptor_pb2.DescriptorProto] = {}

    def add(prefix: str, msg: descriptor_pb2.DescriptorProto) -> None:
        name = f"{prefix}.{msg.name}"
        out[name] = msg
        for nested in msg.nested_type:
            add(name, nested)

    for fd in files.values():
        for msg in fd.message_type:
            add(fd.package, msg)
    return out


def table(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> dict[str, Any]:
    messages = _messages(files)
    out: dict[str, Any] = {}
    pending = list(ROOTS)
    while pending:
        name = pending.pop()
        if name in out:
            continue
        msg = messages[name]
        fields = []
        for f in msg.field:
            kind = _TYPES[f.type]
            ref = f.type_name.lstrip(".")
            if kind == "message":
                if messages[ref].options.map_entry:
                    kind = "map"
                pending.append(ref)
            repeated = f.label == descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
            nullable = _NOT_NULLABLE not in f.options.SerializeToString()
            fields.append([f.number, f.json_name or f.name, kind, ref, int(repeated), int(nullable)])
        out[name] = sorted(fields)
    return {"source": "generated.proto descriptors of a Kubernetes Go client", "messages": dict(sorted(out.items()))}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m kubesim.proto_gen PATH-TO-A-KUBECTL-BINARY", file=sys.stderr)
        return 2
    with open(argv[1], "rb") as handle:
        files = descriptors(handle.read())
    json.dump(table(files), sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
