"""Finding the first free pod IP, Service clusterIP or nodePort without gathering every
object's: a `Pool` counts the holders of each taken value, kept in step with the objects
that hold them (`ServiceAddresses` for the API server, `PodIPs` for the kubelet), and
remembers a number below which every value is taken, so a search starts there. It answers
what a scan from the range's start over the taken values would.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Hashable
from typing import Any, Generic, TypeVar

from kubesim.follow import Follower
from kubesim.store import Object, Store

V = TypeVar("V", bound=Hashable)
PODS = ("", "pods")
SERVICES = ("", "services")


class Pool(Generic[V]):
    """Values numbered `start`, `start + 1` ... (below `stop`, if given), and which are taken."""

    def __init__(self, value_of: Callable[[int], V], number_of: Callable[[V], int | None], start: int,
                 stop: int | None = None) -> None:
        self._value_of = value_of
        self._number_of = number_of
        self._start = start
        self._stop = stop
        self._holders: dict[V, int] = {}
        self._low = start  # every value numbered start .. _low - 1 is taken

    def __contains__(self, value: object) -> bool:
        return value in self._holders

    def hold(self, value: V) -> None:
        self._holders[value] = self._holders.get(value, 0) + 1

    def release(self, value: V) -> None:
        left = self._holders.get(value, 0) - 1
        if left > 0:
            self._holders[value] = left
            return
        if self._holders.pop(value, None) is None:
            return
        number = self._number_of(value)
        if number is not None and self._start <= number < self._low:
            self._low = number

    def clear(self) -> None:
        self._holders.clear()
        self._low = self._start

    def first_free(self, skip: Container[V] = ()) -> V:
        """The lowest-numbered value neither taken nor in `skip` (not taken by this call).

        Raises StopIteration when the range is full, as `next()` over the range would."""
        number = self._low
        while self._stop is None or number < self._stop:
            value = self._value_of(number)
            if value not in self._holders:
                if value not in skip:
                    return value
            elif number == self._low:
                self._low = number + 1
            number += 1
        raise StopIteration


def address(prefix: str, number: int) -> str:
    """The number-th address of a prefix: prefix.{number // 250}.{number % 250 + 1}."""
    return f"{prefix}.{number // 250}.{number % 250 + 1}"


def address_pool(prefix: str, start: int) -> Pool[str]:
    """Addresses `address(prefix, n)` from n = `start`."""
    head = prefix + "."

    def number_of(value: str) -> int | None:
        if not value.startswith(head):
            return None
        parts = value[len(head):].split(".")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            return None
        high, low = int(parts[0]), int(parts[1])
        return high * 250 + low - 1 if 1 <= low <= 250 else None

    return Pool(lambda n: address(prefix, n), number_of, start)


def node_port_pool() -> Pool[int]:
    """The default NodePort range, 30000-32767."""
    return Pool(lambda n: n, lambda v: v if isinstance(v, int) else None, 30000, 32768)


class ServiceAddresses:
    """The clusterIPs (10.96.x.y from the 10th) and nodePorts the stored Services hold."""

    def __init__(self, store: Store) -> None:
        self.cluster_ips = address_pool("10.96", 10)
        self.node_ports = node_port_pool()
        self._services = Follower(store, SERVICES, self._fold, self._reset)

    def current(self) -> ServiceAddresses:
        self._services.sync()
        return self

    def _reset(self) -> None:
        self.cluster_ips.clear()
        self.node_ports.clear()

    def _fold(self, old: Object | None, new: Object | None) -> None:
        for obj, taken in ((old, False), (new, True)):
            if obj is None:
                continue
            spec = obj.get("spec") or {}
            cluster_ip = spec.get("clusterIP", "")
            if isinstance(cluster_ip, str):
                _mark(self.cluster_ips, cluster_ip, taken)
            for port in spec.get("ports") or []:
                node_port = port.get("nodePort")
                if isinstance(node_port, int):
                    _mark(self.node_ports, node_port, taken)


def _mark(pool: Pool[Any], value: object, taken: bool) -> None:
    if taken:
        pool.hold(value)
    else:
        pool.release(value)


class PodIPs:
    """The pod IPs (10.244.x.y from the 1st) taken: by stored pods' `status.podIP` and by the
    kubelet's runs (`run_started` / `run_ended`), whose IP may not be written yet."""

    def __init__(self, store: Store) -> None:
        self.pool = address_pool("10.244", 1)
        self._runs: dict[str, str] = {}
        self._pods = Follower(store, PODS, self._fold, self._reset)

    def first_free(self) -> str:
        self._pods.sync()
        return self.pool.first_free()

    def run_started(self, uid: str, ip: str) -> None:
        self.run_ended(uid)
        self._runs[uid] = ip
        self.pool.hold(ip)

    def run_ended(self, uid: str) -> None:
        ip = self._runs.pop(uid, None)
        if ip is not None:
            self.pool.release(ip)

    def _reset(self) -> None:
        self.pool.clear()
        for ip in self._runs.values():
            self.pool.hold(ip)

    def _fold(self, old: Object | None, new: Object | None) -> None:
        for obj, taken in ((old, False), (new, True)):
            ip = ((obj or {}).get("status") or {}).get("podIP")
            if ip and isinstance(ip, str):
                _mark(self.pool, ip, taken)
