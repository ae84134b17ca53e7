"""ACLs in the metadata store, in Kafka's ZooKeeper layout (``kafka.zk.ZkAclStore``).

* Literal patterns: ``/kafka-acl/<ResourceType>/<name>`` (``/kafka-acl/Topic/orders``);
  prefixed ones: ``/kafka-acl-extended/prefixed/<ResourceType>/<prefix>``.
* A resource's znode holds every entry on it:
  ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}``;
  a resource whose last entry goes is deleted. Writes are compare-and-set on the znode's
  version, so two brokers adding ACLs at once both land.
* After a write, a sequential ``/kafka-acl-changes/acl_changes_<n>`` holding ``Topic:orders``
  (literal; ``LiteralAclChangeStore``) or ``/kafka-acl-extended-changes/acl_changes_<n>``
  holding ``{"version":1,"resourceType":"Topic","name":"orders","patternType":"PREFIXED"}``
  (``ExtendedAclChangeStore``) tells every broker to re-read that resource.
"""

from __future__ import annotations

import json

from odradek.metadata.errors import BadVersionError, NodeExistsError, NoNodeError
from odradek.protocol.acl_binding import (
    LITERAL, PATTERN_TYPE_NAMES, PREFIXED, RESOURCE_TYPE_NAMES, AccessControlEntry, ResourcePattern, code_of,
)

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
KEEP_NOTIFICATIONS = 100  # Kafka deletes them after 15 minutes; the store keeps no ages


def resource_path(pattern: ResourcePattern) -> str:
    root = LITERAL_ROOT if pattern.pattern_type == LITERAL else PREFIXED_ROOT
    return f"{root}/{RESOURCE_TYPE_NAMES[pattern.resource_type]}/{pattern.name}"


def encode_entries(entries) -> bytes:
    acls = sorted((e.to_json() for e in entries), key=lambda d: sorted(d.items()))
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_entries(data: bytes) -> frozenset[AccessControlEntry]:
    """The entries of a resource znode; entries that do not parse are skipped."""
    if not data:
        return frozenset()
    doc = json.loads(data)
    out = set()
    for item in doc.get("acls", []):
        try:
            out.add(AccessControlEntry.from_json(item))
        except (KeyError, ValueError, TypeError):
            continue
    return frozenset(out)


def encode_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """The notification's parent path and data for a change of ``pattern``."""
    if pattern.pattern_type == LITERAL:
        return LITERAL_CHANGES, f"{RESOURCE_TYPE_NAMES[pattern.resource_type]}:{pattern.name}".encode()
    doc = {"version": 1, "resourceType": RESOURCE_TYPE_NAMES[pattern.resource_type], "name": pattern.name,
           "patternType": PATTERN_TYPE_NAMES[pattern.pattern_type]}
    return EXTENDED_CHANGES, json.dumps(doc, separators=(",", ":")).encode()


def decode_change(parent: str, data: bytes) -> ResourcePattern:
    """Raises ValueError (or KeyError) for a malformed notification."""
    text = data.decode()
    if parent == LITERAL_CHANGES:
        kind, sep, name = text.partition(":")
        if not sep:
            raise ValueError(f"expected ResourceType:ResourceName, got {text!r}")
        return ResourcePattern(code_of(RESOURCE_TYPE_NAMES, kind), name, LITERAL)
    doc = json.loads(text)
    return ResourcePattern(code_of(RESOURCE_TYPE_NAMES, doc["resourceType"]), doc["name"],
                           code_of(PATTERN_TYPE_NAMES, doc["patternType"]))


class AclStore:
    """Reads and writes the ACL znodes of a ``MetadataStore`` (blocking: call off the loop)."""

    def __init__(self, store) -> None:
        self.store = store

    def load_all(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        out = {}
        for root, pattern_type in ((LITERAL_ROOT, LITERAL), (PREFIXED_ROOT, PREFIXED)):
            for kind in self._children(root):
                try:
                    resource_type = code_of(RESOURCE_TYPE_NAMES, kind)
                except ValueError:
                    continue
                for name in self._children(f"{root}/{kind}"):
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    entries = self.read(pattern)
                    if entries:
                        out[pattern] = entries
        return out

    def read(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        try:
            data, _ = self.store.get(resource_path(pattern))
        except NoNodeError:
            return frozenset()
        try:
            return decode_entries(data)
        except ValueError:
            return frozenset()

    def update(self, pattern: ResourcePattern, change) -> frozenset[AccessControlEntry]:
        """Replace the entries of ``pattern`` by ``change(current)``, compare-and-set, retried
        while other writers get in between; write a change notification; return the new set."""
        path = resource_path(pattern)
        while True:
            try:
                data, version = self.store.get(path)
                current = decode_entries(data)
            except NoNodeError:
                current, version = frozenset(), None
            wanted = frozenset(change(current))
            if wanted == current:
                return current
            try:
                if not wanted:
                    self.store.delete(path, version)
                elif version is None:
                    self.store.create(path, encode_entries(wanted), make_parents=True)
                else:
                    self.store.set(path, encode_entries(wanted), version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            self._notify(pattern)
            return wanted

    def _notify(self, pattern: ResourcePattern) -> None:
        parent, data = encode_change(pattern)
        self.store.create(f"{parent}/{CHANGE_PREFIX}", data, sequential=True, make_parents=True)
        names = self.notifications(parent)
        for _, name in names[:-KEEP_NOTIFICATIONS]:
            try:
                self.store.delete(f"{parent}/{name}")
            except NoNodeError:
                pass

    def notifications(self, parent: str) -> list[tuple[int, str]]:
        """``(sequence, name)`` of the notifications under ``parent``, oldest first."""
        found = []
        for name in self._children(parent):
            suffix = name[len(CHANGE_PREFIX):]
            if name.startswith(CHANGE_PREFIX) and suffix.isdigit():
                found.append((int(suffix), name))
        return sorted(found)

    def _children(self, path: str) -> list[str]:
        try:
            return self.store.children(path)
        except NoNodeError:
            return []
