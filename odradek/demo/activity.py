"""A synthetic activity stream: page views and searches of a site's members, the data that
Kafka was first built to carry.

Each event is a small JSON object keyed by its member id, so that all of a member's events
land in the same partition (semantic partitioning: ``hash(member_id) % num_partitions``)::

    {"type": "page_view", "member": 42, "page": "/jobs/1234", "referrer": "/feed", "ts": ms}
    {"type": "search", "member": 42, "query": "python engineer", "results": 17, "ts": ms}

Realism, roughly: a few members are far busier than most and a few pages far more viewed
(Zipf-like weights); members act in short sessions (a burst of events close in time, never
later than the clock's ``ceiling``: no event is stamped in the future); events arrive a
little out of order (up to ``JITTER_MS``), and a rare one (``LATE_SHARE``) very late, more
than the streaming job's watermark, as mobile clients do. The generator is seeded: the
same seed gives the same events (the demo draws a new seed each run).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Callable, Iterator

__all__ = ["Event", "ActivityGenerator", "PAGE_VIEWS", "SEARCHES"]

PAGE_VIEWS = "page_views"
SEARCHES = "searches"
JITTER_MS = 20_000
LATE_MS = 5 * 60_000  # beyond the streaming job's watermark
LATE_SHARE = 0.002

_SECTIONS = [("/feed", 30), ("/jobs", 14), ("/jobs/{job}", 22), ("/profile/{member}", 12),
             ("/company/{company}", 8), ("/messages", 7), ("/notifications", 5), ("/", 2)]
_COMPANIES = ["acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell"]
_TERMS = ["python", "kafka", "spark", "engineer", "data", "remote", "senior", "streaming",
          "analyst", "platform", "berlin", "paris", "tokyo", "manager", "intern"]


@dataclass(frozen=True)
class Event:
    topic: str
    member: int
    timestamp: int
    value: bytes

    @property
    def key(self) -> bytes:
        return b"member-%d" % self.member


class ActivityGenerator:
    """Events of ``members`` members; ``clock()`` gives each session's time in ms."""

    def __init__(self, members: int = 1000, seed: int = 7, search_share: float = 0.2) -> None:
        self.rng = random.Random(seed)
        self.members = list(range(1, members + 1))
        # Zipf-like activity: member i acts with weight 1/i^0.8.
        self.member_weights = [1 / (i ** 0.8) for i in self.members]
        self.jobs = [1000 + i for i in range(60)]
        self.job_weights = [1 / (i + 1) for i in range(60)]
        self.search_share = search_share

    def events(self, count: int, clock: Callable[[], int], ceiling: Callable[[], int] | None = None) -> Iterator[Event]:
        """``count`` events, in sessions of 1-12 events starting at ``clock()``; no event
        time beyond ``ceiling()`` (the present, for a clock that simulates the past)."""
        ceiling = ceiling or clock
        made = 0
        while made < count:
            member = self.rng.choices(self.members, self.member_weights)[0]
            at = clock()
            referrer = "/feed"
            for _ in range(min(self.rng.randint(1, 12), count - made)):
                at = min(at + self.rng.randint(200, 15_000), ceiling())
                page = self._page()
                yield self._event(member, self._arrival(at), page, referrer)
                referrer = page
                made += 1

    def _arrival(self, at: int) -> int:
        """Event time as recorded: a little earlier than ``at`` (clients report late)."""
        if self.rng.random() < LATE_SHARE:
            return at - LATE_MS - self.rng.randint(0, 60_000)
        return at - self.rng.randint(0, JITTER_MS)

    def _page(self) -> str:
        template = self.rng.choices([s for s, _ in _SECTIONS], [w for _, w in _SECTIONS])[0]
        return template.format(job=self.rng.choices(self.jobs, self.job_weights)[0],
                               member=self.rng.choices(self.members, self.member_weights)[0],
                               company=self.rng.choice(_COMPANIES))

    def _event(self, member: int, ts: int, page: str, referrer: str) -> Event:
        if self.rng.random() < self.search_share:
            query = " ".join(self.rng.sample(_TERMS, self.rng.randint(1, 3)))
            body = {"type": "search", "member": member, "query": query,
                    "results": self.rng.randint(0, 200), "ts": ts}
            return Event(SEARCHES, member, ts, json.dumps(body, separators=(",", ":")).encode())
        body = {"type": "page_view", "member": member, "page": page, "referrer": referrer, "ts": ts}
        return Event(PAGE_VIEWS, member, ts, json.dumps(body, separators=(",", ":")).encode())
