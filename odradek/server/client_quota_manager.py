"""Client byte-rate quotas, as Kafka's ``ClientQuotaManager`` (one per quota type: produce,
fetch) with its ``DefaultQuotaCallback``.

Quotas come from ``server/client_quota_configs.py`` (``/config/users``, ``/config/clients``);
the broker keeps all of them in memory (``QuotaCache``), loaded at start and re-read per entity
on each ``/config/changes`` notification. The quota of a connection's (user, client id) is the
most specific of, in Kafka's order::

    1. /config/users/<user>/clients/<client-id>
    2. /config/users/<user>/clients/<default>
    3. /config/users/<user>
    4. /config/users/<default>/clients/<client-id>
    5. /config/users/<default>/clients/<default>
    6. /config/users/<default>
    7. /config/clients/<client-id>
    8. /config/clients/<default>

The user is the connection principal's name (``ANONYMOUS`` when unauthenticated). Quotas are
tracked per that matched entity (Kafka's metric tags): clients sharing a ``<default>`` quota
are each measured alone, clients sharing ``/config/clients/x`` share it.

Rates are measured as Kafka's ``Rate`` over ``quota.window.num`` samples (11) of
``quota.window.size.seconds`` (1 s) each: the bytes recorded in the live samples divided by
their span, the span taken as at least ``quota.window.num - 1`` windows (so a client's first
bytes are not measured over a few milliseconds). A client over its quota is throttled for
``(rate - quota) / quota * span`` (Kafka's ``QuotaUtils.throttleTime``, unbounded for byte
rates as in Kafka's ``ClientQuotaManager``: one huge request earns a long pause).

When no quota exists anywhere, ``QuotaCache.empty`` is True and the request paths skip the
manager entirely: the fast path costs one attribute check. ``request_percentage`` quotas (the
handlers' time) are measured by ``server/client_request_quota.py`` on the same rates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.server import client_quota_configs as configs


def _precedence(user: str, client_id: str) -> list[tuple]:
    """The entities Kafka's DefaultQuotaCallback tries, most specific first."""
    e = configs.make_entity
    return [e(user=user, client_id=client_id), e(user=user, client_id=None), e(user=user),
            e(user=None, client_id=client_id), e(user=None, client_id=None), e(user=None),
            e(client_id=client_id), e(client_id=None)]


# Lookups remembered per (key, user, client id) until the next change; past this many the
# memo starts over (a client id per connection must not grow it without bound).
_MEMO_LIMIT = 10_000


class QuotaCache:
    """Every configured quota: entity -> {key: value}. ``find``'s answers are remembered
    until the quotas change: they are looked up for every request of every client while some
    quota exists, and the eight entities of the precedence cost ~1.4 us to build and try."""

    def __init__(self) -> None:
        self.quotas: dict[tuple, dict[str, float]] = {}
        self.empty = True
        self.requests = False  # some entity has a request_percentage (server/client_request_quota.py)
        self._found: dict[tuple, tuple[tuple, float] | None] = {}

    def load(self, everything: dict[tuple, dict[str, float]]) -> None:
        self.quotas = dict(everything)
        self._changed()

    def update(self, entity: tuple, quotas: dict[str, float]) -> None:
        """Set ``entity``'s quotas (none: it has no quota any more)."""
        if quotas:
            self.quotas[entity] = quotas
        else:
            self.quotas.pop(entity, None)
        self._changed()

    def _changed(self) -> None:
        self._found = {}
        self.empty = not self.quotas
        self.requests = any("request_percentage" in q for q in self.quotas.values())

    def find(self, key: str, user: str, client_id: str) -> tuple[tuple, float] | None:
        """``(entity, quota)`` of the most specific entity with a ``key`` quota, or None."""
        if self.empty:
            return None
        memo = (key, user, client_id)
        try:
            return self._found[memo]
        except KeyError:
            pass
        if len(self._found) >= _MEMO_LIMIT:
            self._found = {}
        found = self._found[memo] = self._search(key, user, client_id)
        return found

    def _search(self, key: str, user: str, client_id: str) -> tuple[tuple, float] | None:
        for entity in _precedence(user, client_id):
            quota = self.quotas.get(entity, {}).get(key)
            if quota is not None:
                return entity, quota
        return None


@dataclass
class _Sensor:
    """Kafka's ``SampledStat`` with ``Rate``: ``samples`` sample windows, oldest first."""
    starts: list = field(default_factory=list)  # start time (ms) of each live sample
    totals: list = field(default_factory=list)  # bytes recorded in each live sample


class ClientQuotaManager:
    """Byte-rate quotas of one kind (``producer_byte_rate`` or ``consumer_byte_rate``)."""

    def __init__(self, key: str, cache: QuotaCache, clock, window_num: int = 11,
                 window_size_seconds: int = 1) -> None:
        self.key = key
        self.cache = cache
        self.clock = clock
        self.samples = max(window_num, 2)
        self.window_ms = window_size_seconds * 1000
        self.sensors: dict[tuple, _Sensor] = {}

    def record_and_get_throttle_time_ms(self, user: str, client_id: str, nbytes: int) -> int:
        """Record ``nbytes`` for the client and return how long to throttle it (0: not)."""
        found = self.cache.find(self.key, user, client_id)
        if found is None:
            return 0
        return self.record_for(found, user, client_id, nbytes)

    def record_for(self, found: tuple[tuple, float], user: str, client_id: str, nbytes: float) -> int:
        """Record ``nbytes`` against ``found`` (``QuotaCache.find``'s ``(entity, quota)`` of the
        client) and return the throttle time in ms (0: within the quota)."""
        entity, quota = found
        # clients sharing a <default> entity are measured apart, as Kafka's metric tags
        tags = _tags(entity, user, client_id)
        sensor = self.sensors.get(tags)
        if sensor is None:
            sensor = self.sensors[tags] = _Sensor()
        now = self.clock.milliseconds()
        self._record(sensor, nbytes, now)
        span = self._span_ms(sensor, now)
        rate = sum(sensor.totals) * 1000.0 / span
        if quota <= 0:
            return int(span)
        if rate <= quota:
            return 0
        return int(round((rate - quota) / quota * span))

    def unrecord(self, user: str, client_id: str, nbytes: int) -> None:
        """Take back ``nbytes`` recorded for a response that was not sent after all (Kafka's
        ``unrecordQuotaSensor``: a throttled fetch is answered empty)."""
        found = self.cache.find(self.key, user, client_id)
        sensor = self.sensors.get(_tags(found[0], user, client_id)) if found is not None else None
        if sensor is not None:
            self._record(sensor, -nbytes, self.clock.milliseconds())

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """The most one request may record without being throttled for sure, even with nothing
        else recorded (Kafka's ``getMaxValueInQuotaWindow``): a consumer's fetch is capped to
        it, so a fetch larger than the quota allows cannot be throttled, answered empty, and
        starve its consumer. Infinite when the client has no quota."""
        found = self.cache.find(self.key, user, client_id)
        if found is None:
            return float("inf")
        return found[1] * (self.samples - 1) * self.window_ms / 1000

    def _record(self, sensor: _Sensor, nbytes: int, now: int) -> None:
        if not sensor.starts or now >= sensor.starts[-1] + self.window_ms:
            sensor.starts.append(now)
            sensor.totals.append(0)
        sensor.totals[-1] += nbytes
        # purge samples older than the whole window (Kafka's SampledStat.purgeObsoleteSamples)
        horizon = now - self.samples * self.window_ms
        while sensor.starts and sensor.starts[0] <= horizon:
            del sensor.starts[0]
            del sensor.totals[0]

    def _span_ms(self, sensor: _Sensor, now: int) -> float:
        """Kafka's ``Rate.windowSize``: elapsed since the oldest sample, at least
        ``samples - 1`` whole windows."""
        elapsed = now - sensor.starts[0]
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return float(max(elapsed, 1))


def _tags(entity: tuple, user: str, client_id: str) -> tuple:
    """What a matched entity measures (Kafka's metric tags): its types, each with the client's
    own name, so each client under a ``<default>`` is measured alone while clients of any user
    sharing ``/config/clients/<c>`` share one rate. ``("", c)``: a client-id-only entity."""
    names = dict(entity)
    return (user if configs.USER in names else "", client_id if configs.CLIENT_ID in names else "")


def throttle(ctx, manager: ClientQuotaManager, nbytes: int) -> int:
    """Record ``nbytes`` for the request's connection and, when it went over its quota, mute
    the connection for the throttle time (KIP-219: the response carrying the time is sent at
    once, then nothing more is read from that client until the time has passed). Returns the
    throttle time for the response. Callers check ``QuotaCache.empty`` first."""
    return throttle_connection(ctx.connection, ctx.client_id, manager, nbytes)


def throttle_connection(connection, client_id: str | None, manager: ClientQuotaManager, nbytes: int) -> int:
    """``throttle`` for a request known by its connection and client id (the produce fast
    path's: it builds no request context)."""
    if getattr(connection, "in_process", False):
        return 0  # the broker's own requests are never throttled
    ms = manager.record_and_get_throttle_time_ms(connection.principal.name, client_id or "", nbytes)
    if ms > 0:
        connection.throttle(ms)
    return ms
