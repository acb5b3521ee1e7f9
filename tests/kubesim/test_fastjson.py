"""kubesim's JSON (`kubesim.fastjson`): orjson where it can, and the standard library's answer
where orjson refuses what `json` accepts, so no caller sees a difference."""

from __future__ import annotations

import json

import pytest

from kubesim import fastjson

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "labels": {"ome.io/index": "3"}, "resourceVersion": "12"},
    "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 8080}]}]},
    "status": {"conditions": [{"type": "Ready", "status": "True"}], "ratio": 0.25, "ok": True, "none": None},
}


def test_a_round_trip_gives_what_the_standard_library_gives() -> None:
    assert fastjson.loads(fastjson.dumps(POD)) == json.loads(json.dumps(POD)) == POD
    assert fastjson.dumps(POD) == json.dumps(POD, separators=(",", ":")).encode()


def test_a_clone_is_deep_and_turns_tuples_into_lists() -> None:
    original = {"a": {"b": [1, {"c": 2}]}, "t": (1, 2)}
    copy = fastjson.clone(original)
    copy["a"]["b"][1]["c"] = 99
    assert original["a"]["b"][1]["c"] == 2
    assert copy["t"] == [1, 2]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({1: "a"}, b'{"1":"a"}'),  # a key that is not a string: json writes it as one
        ({"n": 2**70}, b'{"n":1180591620717411303424}'),  # past 64 bits
    ],
)
def test_what_orjson_refuses_to_write_the_standard_library_writes(value: object, expected: bytes) -> None:
    assert fastjson.dumps(value) == expected


def test_what_orjson_refuses_to_read_the_standard_library_reads() -> None:
    assert fastjson.loads(b'{"n": 1180591620717411303424}') == {"n": 2**70}
    assert fastjson.loads("[NaN]")[0] != fastjson.loads("[NaN]")[0]  # json reads NaN; orjson does not


def test_a_malformed_document_raises_value_error() -> None:
    with pytest.raises(ValueError):
        fastjson.loads(b'{"a": ')
