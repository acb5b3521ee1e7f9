"""Request counters and API fault injection.

Benchmarks read the counters to see what the product costs the API server (requests by verb
and resource, and by the object a request names or creates); tests turn on faults to prove the
product survives a flaky API server: a rate of 500/429/409 answers, added latency, and watch
streams cut every N seconds.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kubesim.errors import ApiError

_WRITE_VERBS = {"create", "update", "patch"}


@dataclass
class FaultSettings:
    error_rate: float = 0.0
    codes: tuple[int, ...] = (500, 429, 409)
    latency_seconds: float = 0.0
    watch_cut_seconds: float | None = None


@dataclass
class Faults:
    """Counts every API request and decides which ones to fail."""

    settings: FaultSettings = field(default_factory=FaultSettings)
    requests: Counter[tuple[str, str]] = field(default_factory=Counter)
    by_object: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    """(verb, resource, "namespace/name") of every request that names one object: in its path,
    or in the body it creates. Lists, watches, generated names and a create an injected fault
    refused before its body was read are counted in `requests` only; `reset_counters` empties
    both."""
    injected: Counter[int] = field(default_factory=Counter)
    watches_open: int = 0
    rng: random.Random = field(default_factory=random.Random)

    def configure(self, error_rate: float = 0.0, codes: tuple[int, ...] | list[int] = (500, 429, 409),
                  latency_seconds: float = 0.0, watch_cut_seconds: float | None = None) -> None:
        if not 0.0 <= error_rate <= 1.0:
            raise ApiError(400, f"error_rate must be between 0 and 1, got {error_rate}")
        bad = [c for c in codes if c not in (409, 429, 500, 503, 504)]
        if bad:
            raise ApiError(400, f"codes may contain 409, 429, 500, 503 and 504, got {bad}")
        self.settings = FaultSettings(error_rate, tuple(codes), latency_seconds, watch_cut_seconds)

    async def before(self, verb: str, resource: str) -> None:
        """Count the request, add latency, and maybe raise an injected failure."""
        self.requests[(verb, resource)] += 1
        s = self.settings
        if s.latency_seconds > 0:
            await asyncio.sleep(s.latency_seconds)
        if s.error_rate <= 0 or self.rng.random() >= s.error_rate:
            return
        # A 409 only makes sense for a write; reads draw from the other codes.
        codes = [c for c in s.codes if c != 409 or verb in _WRITE_VERBS]
        if not codes:
            return
        code = self.rng.choice(codes)
        self.injected[code] += 1
        if code == 429:
            raise ApiError(429, "the server has received too many requests and has asked us to try again later "
                           "(injected by kubesim)", details={"retryAfterSeconds": 1}, headers={"Retry-After": "1"})
        if code == 409:
            raise ApiError(409, f"Operation cannot be fulfilled on {resource}: the object has been modified; please "
                           "apply your changes to the latest version and try again (injected by kubesim)")
        raise ApiError(code, f"an error on the server (\"injected by kubesim\") has prevented the request from "
                       f"succeeding ({verb} {resource})")

    def named(self, verb: str, resource: str, namespace: str, name: str) -> None:
        """Attribute a request `before` counted to the object it names."""
        if name:
            self.by_object[(verb, resource, f"{namespace}/{name}" if namespace else name)] += 1

    def counters(self) -> dict[str, Any]:
        return {
            "requests": dict(self.requests),
            "by_object": dict(self.by_object),
            "total": sum(self.requests.values()),
            "faults_injected": {str(k): v for k, v in self.injected.items()},
            "watches_open": self.watches_open,
        }

    def counters_json(self) -> dict[str, Any]:
        data = self.counters()
        data["requests"] = [{"verb": v, "resource": r, "count": n} for (v, r), n in sorted(self.requests.items())]
        data["by_object"] = [{"verb": v, "resource": r, "object": o, "count": n}
                             for (v, r, o), n in sorted(self.by_object.items())]
        return data

    def reset_counters(self) -> None:
        self.requests.clear()
        self.by_object.clear()
        self.injected.clear()
