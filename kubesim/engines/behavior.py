"""How a simulated engine answers requests, per image, and how many requests its clients send.

The defaults, which are what a test gets unless it says otherwise:

- every InferenceService receives `DEFAULT_REQUESTS_PER_SECOND` (20) requests per second,
  and each of its components (router, engine, decoder) sees every one of them, since a
  request passes through each; a rate can be set for the whole cluster or per
  InferenceService;
- an image's engine fails `DEFAULT_ERROR_RATIO` (1 %) of its requests with HTTP 500, and
  answers the others with a time to first token drawn from a log-normal distribution whose
  mean is `DEFAULT_TTFT_SECONDS` (0.2 s) and whose log has standard deviation
  `TTFT_LOG_SIGMA` (0.5).

So a test says "this image is bad" with, say, `error_ratio=0.2` or `ttft_seconds=2.0` for it,
and everything else stays the healthy default. An image is matched exactly, then by its
repository without the tag (`vllm` covers `vllm:0.6`), then by the longest pattern ending in
`*` that prefixes it (`registry.local/vllm*`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kubesim.errors import ApiError

DEFAULT_REQUESTS_PER_SECOND = 20.0
DEFAULT_ERROR_RATIO = 0.01
DEFAULT_TTFT_SECONDS = 0.2
TTFT_LOG_SIGMA = 0.5
# Beyond this a "rate" is a typo: the counters would still be right, the test would just wait
# for nothing.
MAX_REQUESTS_PER_SECOND = 1_000_000.0
MAX_TTFT_SECONDS = 3600.0


def _number(field_name: str, value: Any, fix: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ApiError(400, f"{field_name} must be a number, got {value!r}: {fix}")
    return float(value)


def check_rate(value: Any) -> float:
    rate = _number("requests_per_second", value, "send requests per second, e.g. 20")
    if not 0.0 <= rate <= MAX_REQUESTS_PER_SECOND:
        raise ApiError(400, f"requests_per_second must be between 0 and {MAX_REQUESTS_PER_SECOND:.0f}, "
                       f"got {value!r}: 0 stops the traffic, 20 is the default")
    return rate


@dataclass(frozen=True)
class EngineBehavior:
    """What an engine does with each request it receives."""

    error_ratio: float = DEFAULT_ERROR_RATIO
    """Share of requests answered with HTTP 500, 0..1."""

    ttft_seconds: float = DEFAULT_TTFT_SECONDS
    """Mean time to first token of the successful requests, in seconds."""

    def __post_init__(self) -> None:
        ratio = _number("error_ratio", self.error_ratio, "send a share between 0 and 1, e.g. 0.2")
        if not 0.0 <= ratio <= 1.0:
            raise ApiError(400, f"error_ratio must be between 0 and 1, got {self.error_ratio!r}: 0 answers every "
                           f"request, 1 fails every one, {DEFAULT_ERROR_RATIO} is the default")
        ttft = _number("ttft_seconds", self.ttft_seconds, "send a mean in seconds, e.g. 0.2")
        if not 0.0 < ttft <= MAX_TTFT_SECONDS:
            raise ApiError(400, f"ttft_seconds must be above 0 and at most {MAX_TTFT_SECONDS:.0f}, got "
                           f"{self.ttft_seconds!r}: {DEFAULT_TTFT_SECONDS} is the default")
        object.__setattr__(self, "error_ratio", ratio)
        object.__setattr__(self, "ttft_seconds", ttft)


DEFAULT_BEHAVIOR = EngineBehavior()


def untagged(image: str) -> str:
    """The image's repository without its tag or digest (`reg:5000/vllm:0.6` -> `reg:5000/vllm`)."""
    name = image.split("@", 1)[0]
    head, sep, tag = name.rpartition(":")
    return head if sep and "/" not in tag else name


@dataclass
class TrafficSettings:
    """The offered load and every image's behaviour, as the control API last set them."""

    requests_per_second: float = DEFAULT_REQUESTS_PER_SECOND
    """Requests per second each InferenceService receives unless it has a rate of its own."""

    service_rates: dict[tuple[str, str], float] = field(default_factory=dict)
    """(namespace, InferenceService name) -> its own requests per second."""

    images: dict[str, EngineBehavior] = field(default_factory=dict)
    """Image, repository or `prefix*` pattern -> how its engine behaves."""

    def rate(self, namespace: str, inferenceservice: str) -> float:
        return self.service_rates.get((namespace, inferenceservice), self.requests_per_second)

    def set_rate(self, requests_per_second: float | None, namespace: str | None = None,
                 inferenceservice: str | None = None) -> None:
        """The cluster-wide rate, or (with both names) one InferenceService's; None removes
        that InferenceService's own rate so the cluster-wide one applies again."""
        for field_name, name in (("namespace", namespace), ("inferenceservice", inferenceservice)):
            if name is not None and (not isinstance(name, str) or not name):
                raise ApiError(400, f"{field_name} must be a non-empty name, got {name!r}: leave it out for the "
                               "cluster-wide rate")
        if (namespace is None) != (inferenceservice is None):
            raise ApiError(400, f"namespace={namespace!r} and inferenceservice={inferenceservice!r}: give both to "
                           "set one InferenceService's rate, or neither to set the cluster-wide rate")
        if namespace is None or inferenceservice is None:
            if requests_per_second is None:
                raise ApiError(400, "requests_per_second must be a number for the cluster-wide rate, got None: "
                               f"send e.g. {DEFAULT_REQUESTS_PER_SECOND:g}")
            self.requests_per_second = check_rate(requests_per_second)
            return
        if requests_per_second is None:
            self.service_rates.pop((namespace, inferenceservice), None)
        else:
            self.service_rates[(namespace, inferenceservice)] = check_rate(requests_per_second)

    def set_behavior(self, image: str, error_ratio: float | None = None, ttft_seconds: float | None = None) -> None:
        """Replace how `image` (exact, repository, or `prefix*`) behaves; a setting left None takes
        its default, and with neither set the image is back to the defaults."""
        if not isinstance(image, str) or not image or image == "*":
            raise ApiError(400, f"image must name an image, a repository or a prefix ending in '*', got {image!r}: "
                           'e.g. "vllm:0.6", "vllm" or "registry.local/vllm*"')
        if error_ratio is None and ttft_seconds is None:
            self.images.pop(image, None)
            return
        self.images[image] = EngineBehavior(
            error_ratio=DEFAULT_ERROR_RATIO if error_ratio is None else error_ratio,
            ttft_seconds=DEFAULT_TTFT_SECONDS if ttft_seconds is None else ttft_seconds,
        )

    def configured(self, image: str) -> EngineBehavior | None:
        """The behaviour set for `image` (exact, then repository, then longest prefix), or None."""
        found = self.images.get(image) or self.images.get(untagged(image))
        if found is not None:
            return found
        prefixes = [key for key in self.images if key.endswith("*") and image.startswith(key[:-1])]
        return self.images[max(prefixes, key=len)] if prefixes else None

    def behavior(self, images: list[str]) -> EngineBehavior:
        """How a pod with these container images behaves: the first image with a behaviour set
        (the model server, not a sidecar someone left alone), else the defaults."""
        for image in images:
            found = self.configured(image)
            if found is not None:
                return found
        return DEFAULT_BEHAVIOR

    def describe(self) -> dict[str, Any]:
        return {
            "requests_per_second": self.requests_per_second,
            "inferenceservices": [
                {"namespace": ns, "inferenceservice": name, "requests_per_second": rate}
                for (ns, name), rate in sorted(self.service_rates.items())
            ],
            "images": [
                {"image": image, "error_ratio": b.error_ratio, "ttft_seconds": b.ttft_seconds}
                for image, b in sorted(self.images.items())
            ],
            "defaults": {"requests_per_second": DEFAULT_REQUESTS_PER_SECOND, "error_ratio": DEFAULT_ERROR_RATIO,
                         "ttft_seconds": DEFAULT_TTFT_SECONDS},
        }
