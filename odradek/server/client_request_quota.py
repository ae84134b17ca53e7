"""Request quotas (``request_percentage``), as Kafka's ``ClientRequestQuotaManager``.

What is measured: the time the broker's event loop spends handling a client's requests, wall
time in ns (``time.perf_counter_ns``) from the handler's call to its return, plus, for a
handler that waits (a coroutine: a long-poll fetch, an acks=all produce), each of its steps on
the loop; the time it waits in between is not counted. Decoding the request header and
encoding the response are not counted either (in Kafka those are the network threads' work).
odradek has one event loop thread where Kafka has ``num.io.threads`` I/O threads, so the unit
is Kafka's with the loop for the I/O thread: **percentage of one event loop thread** over the
sampled window (``quota.window.num`` samples of ``quota.window.size.seconds``). A quota of 10
lets a client's requests take 10% of the loop: 1 s of handling in the 10 s span Kafka's
``Rate`` measures at least; 200 would be two loops' worth, more than one broker has.

The quota of a connection is found as for byte rates (``server/client_quota_manager.py``:
Kafka's precedence over ``/config/users`` and ``/config/clients``, tracked per matched
entity). Each recorded request adds ``ns * 100 / 1e9`` percent-seconds; when the rate goes
over the quota the client is throttled for ``(rate - quota) / quota * span``, capped at one
window (``quota.window.size.seconds``, Kafka's ``QuotaUtils.boundedThrottleTime``: the request
time of one slow request should not bar a client for long). Throttling is as for byte rates:
the response carries the time in ``throttle_time_ms`` (the larger of the byte-rate and
request throttles, as Kafka's ``KafkaApis`` takes) and the connection is muted for it
(``Connection.throttle``, KIP-219), whatever the response version.

Exempt, as in Kafka (``ApiKeys.clusterAction``, ``sendResponseExemptThrottle``): the
controller's and brokers' cluster actions (LeaderAndIsr, StopReplica, UpdateMetadata,
ControlledShutdown, WriteTxnMarkers, AlterPartition), a follower's Fetch, a Produce with
acks=0 (no response to carry a throttle) and the broker's own in-process requests.

Cost: ``Broker.dispatch`` takes this path only while some entity has a ``request_percentage``
(``QuotaCache.requests``); otherwise requests pay one attribute check. A client without a
request quota is not timed.
"""

from __future__ import annotations

import dataclasses
import time
from types import CoroutineType

from odradek.protocol.api_keys import ApiKey
from odradek.server.client_quota_manager import ClientQuotaManager, QuotaCache
from odradek.server.request import CLOSE_CONNECTION, NO_RESPONSE

REQUEST_PERCENTAGE = "request_percentage"
# ns of handling -> percent-seconds of one thread (Kafka's NanosToPercentagePerSecond)
NANOS_TO_PERCENTAGE = 100.0 / 1e9
# Kafka's ApiKeys with clusterAction that odradek serves: brokers' and the controller's requests
CLUSTER_ACTIONS = frozenset({ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
                             ApiKey.CONTROLLED_SHUTDOWN, ApiKey.WRITE_TXN_MARKERS, ApiKey.ALTER_PARTITION})


class ClientRequestQuotaManager(ClientQuotaManager):
    """``request_percentage`` quotas: handler time per (user, client id) entity, throttle
    bounded by one quota window. ``timer`` returns ns (tests pass a fake one)."""

    def __init__(self, cache: QuotaCache, clock, window_num: int = 11, window_size_seconds: int = 1,
                 timer=time.perf_counter_ns) -> None:
        super().__init__(REQUEST_PERCENTAGE, cache, clock, window_num, window_size_seconds)
        self.max_throttle_ms = window_size_seconds * 1000
        self.timer = timer

    def record_for(self, found: tuple[tuple, float], user: str, client_id: str, nanos: float) -> int:
        """Record ``nanos`` of handling; the throttle time in ms, at most one window."""
        ms = super().record_for(found, user, client_id, nanos * NANOS_TO_PERCENTAGE)
        return min(ms, self.max_throttle_ms)

    # --- around a handler -------------------------------------------------------------------
    def handle(self, ctx, body, handler):
        """``handler(ctx, body)``, timed and charged to the client's request quota when it has
        one; returns what the handler returns (a coroutine stays a coroutine), with the
        throttle time set in the response when the client went over."""
        found = None if exempt(ctx, body) else self._quota_of(ctx)
        if found is None:
            return handler(ctx, body)
        timer = self.timer
        start = timer()
        result = handler(ctx, body)
        spent = timer() - start
        if type(result) is CoroutineType:
            return self._finish(ctx, found, _TimedSteps(result, timer), spent)
        return self._charge(ctx, found, result, spent)

    def _quota_of(self, ctx) -> tuple[tuple, float] | None:
        return self.cache.find(REQUEST_PERCENTAGE, ctx.connection.principal.name, ctx.client_id or "")

    async def _finish(self, ctx, found, steps: "_TimedSteps", spent: int):
        response = await steps
        return self._charge(ctx, found, response, spent + steps.nanos)

    def _charge(self, ctx, found, response, nanos: int):
        """Record ``nanos`` for the request; over the quota, mute the connection and say so in
        the response (the larger of its throttle time and ours)."""
        if response is NO_RESPONSE or response is CLOSE_CONNECTION:
            return response  # acks=0: Kafka records it as exempt
        ms = self.record_for(found, ctx.connection.principal.name, ctx.client_id or "", nanos)
        if ms <= 0:
            return response
        ctx.connection.throttle(ms)
        current = getattr(response, "throttle_time_ms", None)
        if current is not None and ms > current:
            # a copy: a handler may hand out one response object to many requests
            response = dataclasses.replace(response, throttle_time_ms=ms)
        return response


def exempt(ctx, body) -> bool:
    """Requests Kafka never counts against request quotas (see the module docstring)."""
    if getattr(ctx.connection, "in_process", False) or ctx.api_key in CLUSTER_ACTIONS:
        return True
    if ctx.api_key == ApiKey.FETCH:
        state = getattr(body, "replica_state", None)
        return body.replica_id >= 0 or (state is not None and state.replica_id >= 0)
    return False


class _TimedSteps:
    """Awaits a coroutine for the task running it, adding up in ``nanos`` the time of each of
    its steps (from a ``send``/``throw`` into it to its next ``yield`` or its end); the time
    it is suspended is not counted."""

    __slots__ = ("coro", "timer", "nanos")

    def __init__(self, coro, timer) -> None:
        self.coro = coro
        self.timer = timer
        self.nanos = 0

    def __await__(self):
        coro, timer = self.coro, self.timer
        value, error = None, None
        while True:
            start = timer()
            try:
                yielded = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as done:
                return done.value
            finally:
                self.nanos += timer() - start
            try:
                value, error = (yield yielded), None
            except BaseException as e:  # the task's cancellation (or a close): the handler's to handle
                value, error = None, e
