"""The broker's authorizer: Kafka's ``AclAuthorizer`` semantics over a cache of the ACLs.

Enabled by ``authorizer.class.name`` (``kafka.security.authorizer.AclAuthorizer`` or
``org.apache.kafka.metadata.authorizer.StandardAuthorizer``; unset: every request is allowed,
as in Kafka). ``super.users`` (``User:admin;User:broker``) are allowed everything.

A request for ``operation`` on a resource (type, name) by ``principal`` from ``host``:

1. super users are allowed;
2. the entries that apply are those of the literal pattern of that name, of the literal ``*``
   and of every prefixed pattern that is a prefix of the name; with none at all the answer is
   ``allow.everyone.if.no.acl.found`` (default false);
3. an applying DENY entry for the principal (or ``User:*``) and host (or ``*``) with this
   operation or ALL denies: deny wins;
4. else an ALLOW entry with this operation or ALL allows; DESCRIBE is also allowed by READ,
   WRITE, DELETE or ALTER, DESCRIBE_CONFIGS by ALTER_CONFIGS (``AclAuthorizer.authorize``);
5. else denied.

Every decision is written to the audit logger ``kafka.authorizer.logger``
(``server/authorizer_log.py``): denials at INFO, grants at DEBUG.

The cache is filled from the store at start (``server/acl_store.py``) and kept current by the
change notifications every broker writes after a change, so ACLs added through any broker apply
on all of them.
"""

from __future__ import annotations

import logging
import threading

from odradek.protocol.acl_binding import (
    ALL, ALLOW, ALTER, ALTER_CONFIGS, CLUSTER, CLUSTER_NAME, DELETE, DENY, DESCRIBE, DESCRIBE_CONFIGS,
    LITERAL, PREFIXED, READ, WILDCARD_HOST, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE, WRITE, AclBinding,
    AclBindingFilter, ResourcePattern,
)
from odradek.metadata.errors import StoreUnavailableError
from odradek.server.acl_store import EXTENDED_CHANGES, LITERAL_CHANGES, AclStore, decode_change
from odradek.server.authorizer_log import log_decision

log = logging.getLogger("odradek.authorizer")

AUTHORIZER_CLASS_NAMES = frozenset({
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
})
_IMPLIED_BY = {DESCRIBE: (READ, WRITE, DELETE, ALTER), DESCRIBE_CONFIGS: (ALTER_CONFIGS,)}
# Decisions remembered until the ACLs change; past this many the memo starts over (a client
# per host and topic must not grow it without bound).
_DECISIONS_LIMIT = 10_000


def parse_super_users(text: str | None) -> frozenset[str]:
    """``super.users`` is semicolon-separated principals (``User:admin;User:broker``)."""
    return frozenset(p.strip() for p in (text or "").split(";") if p.strip())


class AclAuthorizer:
    """``authorize`` is a cache lookup (on the event loop), its answers remembered until the
    ACLs change; writes go through ``AclStore``."""

    def __init__(self, store, super_users=frozenset(), allow_everyone_if_no_acl_found: bool = False,
                 call_soon=None) -> None:
        self.acl_store = AclStore(store)
        self.store = store
        self.super_users = frozenset(super_users)
        self.allow_everyone = allow_everyone_if_no_acl_found
        self.cache: dict[ResourcePattern, frozenset] = {}
        # Indexes of the cache for ``authorize``: literal entries by (type, name), prefixed
        # entries by type then prefix, so a check costs a dict lookup plus one per prefix of
        # that type, not a pass over every ACL.
        self._literal: dict[tuple[int, str], frozenset] = {}
        self._prefixed: dict[int, dict[str, frozenset]] = {}
        # (principal, host, operation, resource type, name) -> allowed, emptied by every change
        # of the cache (``_refresh``): the produce fast path asks for each topic of each
        # request, and a check walks every prefixed pattern of the type (~1.5 us with a
        # handful of ACLs, more with many prefixes) where a remembered one is a dict lookup.
        self._decisions: dict[tuple, bool] = {}
        self._call_soon = call_soon or (lambda f: f())
        self._last_seen = {LITERAL_CHANGES: -1, EXTENDED_CHANGES: -1}
        self._watches = []
        self._process_lock = threading.Lock()

    # --- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        """Load every ACL, then follow the change notifications written after this point."""
        for parent in self._last_seen:
            self._last_seen[parent] = max(self.acl_store.notifications(parent), default=(-1, ""))[0]
        for pattern, entries in self.acl_store.load_all().items():
            self._refresh(pattern, entries)
        for parent in self._last_seen:
            self._watches.append(self.store.watch_children(parent, self._process))

    def close(self) -> None:
        for watch in self._watches:
            watch.cancel()
        self._watches.clear()

    def _process(self, parent: str) -> None:
        """Read the ACLs that the new notifications under ``parent`` name, then hand them to
        the event loop to apply (``call_soon``). Runs on the store's watch thread, never on the
        loop: a ZooKeeper read may wait seconds through a lost connection, and the loop
        serves every client. Passes are serialised, so they are applied in the order read."""
        with self._process_lock:
            changed = []
            try:
                for seq, name in self.acl_store.notifications(parent):
                    if seq <= self._last_seen[parent]:
                        continue
                    try:
                        data, _ = self.store.get(f"{parent}/{name}")
                        pattern = decode_change(parent, data)
                    except StoreUnavailableError:
                        raise
                    except Exception:  # deleted meanwhile, or written by another tool, malformed
                        self._last_seen[parent] = seq
                        continue
                    changed.append((pattern, self.acl_store.read(pattern)))
                    self._last_seen[parent] = seq
            except StoreUnavailableError as e:  # the rest on reconnection (it runs the watch)
                log.warning("could not read the ACL changes under %s yet: %s", parent, e)
            if changed:
                self._call_soon(lambda: self._apply(changed))

    def _apply(self, changed: list) -> None:
        for pattern, entries in changed:
            self._refresh(pattern, entries)

    def _refresh(self, pattern: ResourcePattern, entries) -> None:
        self._decisions = {}
        entries = frozenset(entries or ())
        if pattern.pattern_type == LITERAL:
            index, key = self._literal, (pattern.resource_type, pattern.name)
        else:
            index, key = self._prefixed.setdefault(pattern.resource_type, {}), pattern.name
        if entries:
            self.cache[pattern] = index[key] = entries
        else:
            self.cache.pop(pattern, None)
            index.pop(key, None)

    # --- decisions ------------------------------------------------------------------------
    def _applying(self, resource_type: int, name: str) -> list:
        out = list(self._literal.get((resource_type, name), ()))
        out.extend(self._literal.get((resource_type, WILDCARD_RESOURCE), ()))
        for prefix, entries in self._prefixed.get(resource_type, {}).items():
            if name.startswith(prefix):
                out.extend(entries)
        return out

    def authorize(self, principal, host: str, operation: int, resource_type: int, name: str, *,
                  api_key: int | None = None, log_if_allowed: bool = True, log_if_denied: bool = True) -> bool:
        """May ``principal`` (a KafkaPrincipal or ``User:x``) from ``host`` do ``operation``?

        Every call, remembered or not, is written to the audit log (``server/authorizer_log.py``)
        for the request ``api_key``; ``log_if_allowed`` / ``log_if_denied`` are Kafka's
        ``Action`` flags: false for a question whose answer grants or refuses nothing by itself
        (authorized operations, filtering a listing, a probe before a narrower check)."""
        key = (principal, host, operation, resource_type, name)
        allowed = self._decisions.get(key)
        if allowed is None:
            if len(self._decisions) >= _DECISIONS_LIMIT:
                self._decisions = {}
            allowed = self._decisions[key] = self._decide(str(principal), host, operation, resource_type, name)
        log_decision(allowed, principal, host, operation, resource_type, name, api_key, log_if_allowed, log_if_denied)
        return allowed

    def _decide(self, who: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        """``authorize``'s answer from the cache of ACLs (the module docstring's steps)."""
        if who in self.super_users:
            return True
        entries = self._applying(resource_type, name)
        if not entries:
            return self.allow_everyone
        principals = (who, WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD_HOST)
        for e in entries:
            if (e.permission_type == DENY and e.principal in principals and e.host in hosts
                    and e.operation in (operation, ALL)):
                return False
        allowing = (operation, ALL, *_IMPLIED_BY.get(operation, ()))
        return any(e.permission_type == ALLOW and e.principal in principals and e.host in hosts
                   and e.operation in allowing for e in entries)

    def authorize_by_resource_type(self, principal, host: str, operation: int, resource_type: int, *,
                                   api_key: int | None = None) -> bool:
        """May the principal do ``operation`` on some resource of this type (Kafka's
        ``authorizeByResourceType``, KIP-679: IDEMPOTENT_WRITE follows from WRITE on any topic)?
        An allowing pattern counts unless a deny pattern covers it (the literal ``*``, the same
        literal, or a prefix of it)."""
        # As Kafka's Authorizer.authorizeByResourceType: a made-up name first, which super users
        # (and allow.everyone.if.no.acl.found, when no ACL applies to it) pass.
        # That probe's denial refuses nothing yet (Kafka's Action with logIfDenied false).
        if self.authorize(principal, host, operation, resource_type, "hardcode", api_key=api_key, log_if_denied=False):
            return True
        principals, hosts = (str(principal), WILDCARD_PRINCIPAL), (host, WILDCARD_HOST)
        allowed, denied = set(), set()
        for pattern, entries in self.cache.items():
            if pattern.resource_type != resource_type:
                continue
            for e in entries:
                if e.principal in principals and e.host in hosts and e.operation in (operation, ALL):
                    (allowed if e.permission_type == ALLOW else denied).add(pattern)
        if ResourcePattern(resource_type, WILDCARD_RESOURCE, LITERAL) in denied:
            return False
        denied_prefixes = [p.name for p in denied if p.pattern_type == PREFIXED]
        for p in allowed:
            if any(p.name.startswith(prefix) for prefix in denied_prefixes):
                continue
            if p.pattern_type == PREFIXED or p not in denied:
                return True
        return False

    def authorize_cluster(self, principal, host: str, operation: int) -> bool:
        return self.authorize(principal, host, operation, CLUSTER, CLUSTER_NAME)

    # --- administration (blocking: off the event loop) -------------------------------------
    def create(self, bindings: list[AclBinding]) -> None:
        by_pattern: dict[ResourcePattern, set] = {}
        for b in bindings:
            by_pattern.setdefault(b.pattern, set()).add(b.entry)
        for pattern, entries in by_pattern.items():
            new = self.acl_store.update(pattern, lambda current, add=entries: current | add)
            self._call_soon(lambda p=pattern, n=new: self._refresh(p, n))

    def describe(self, flt: AclBindingFilter) -> list[AclBinding]:
        return [AclBinding(p, e) for p, entries in list(self.cache.items()) for e in entries
                if flt.matches_pattern(p) and flt.matches_entry(e)]

    def delete(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """For each filter, the bindings it removed (read from the store, not the cache, so a
        binding added through another broker a moment ago is found too)."""
        patterns = set(self.acl_store.load_all())
        results: list[list[AclBinding]] = [[] for _ in filters]
        for pattern in patterns:
            wanted = [f for f in filters if f.matches_pattern(pattern)]
            if not wanted:
                continue
            removed: dict[int, list] = {}

            def change(current, wanted=wanted, removed=removed):
                removed.clear()
                keep = set(current)
                for e in current:
                    for f in wanted:
                        if f.matches_entry(e):
                            removed.setdefault(id(f), []).append(e)
                            keep.discard(e)
                return keep
            new = self.acl_store.update(pattern, change)
            self._call_soon(lambda p=pattern, n=new: self._refresh(p, n))
            for i, f in enumerate(filters):
                results[i].extend(AclBinding(pattern, e) for e in removed.get(id(f), []))
        return results


def make_authorizer(config, store, loop=None) -> AclAuthorizer | None:
    """The authorizer ``authorizer.class.name`` names, started; None when it is unset.
    Raises ValueError for a class odradek does not provide."""
    name = (config["authorizer.class.name"] or "").strip()
    if not name:
        return None
    if name not in AUTHORIZER_CLASS_NAMES:
        raise ValueError(f"authorizer.class.name: odradek provides {' and '.join(sorted(AUTHORIZER_CLASS_NAMES))}, "
                         f"not {name}")
    call_soon = (lambda f: loop.call_soon_threadsafe(f)) if loop is not None else None
    authorizer = AclAuthorizer(store, parse_super_users(config["super.users"]),
                               config["allow.everyone.if.no.acl.found"], call_soon)
    authorizer.start()
    return authorizer
