"""``odradek acls``: add, list and remove ACLs (``kafka-acls.sh``).

    odradek acls --bootstrap-server H:P --add --allow-principal User:alice --operation Read \\
        --topic orders --group billing
    odradek acls --bootstrap-server H:P --add --allow-principal User:bob --producer --topic orders
    odradek acls --bootstrap-server H:P --list [--topic orders] [--resource-pattern-type match]
    odradek acls --bootstrap-server H:P --remove --deny-principal User:eve --operation Write --topic t --force

As Kafka's ``AclCommand``: every principal x operation x host (``*`` when no host flag is
given) becomes an entry on every resource named (``--topic``, ``--group``,
``--transactional-id``, ``--cluster``), its pattern ``--resource-pattern-type`` (``literal``
by default; ``prefixed``; ``match`` and ``any`` only to list or remove). ``--producer`` gives
WRITE, DESCRIBE, CREATE on the topics and WRITE, DESCRIBE on the transactional ids (with
``--idempotent``, IDEMPOTENT_WRITE on the cluster); ``--consumer`` READ, DESCRIBE on the topics
and READ on the groups. ``--list`` prints each resource's entries::

    Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:
     \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)

``--remove`` without ``--force`` asks before deleting (y/n; no answer, at the end of the
input, is no).

A broker's refusal is said with Kafka's names: its error code, the binding or filter as
Kafka's ``AclBinding`` / ``AclBindingFilter`` print themselves, and the broker's message::

    odradek acls: SECURITY_DISABLED for (pattern=ResourcePattern(resourceType=TOPIC, name=orders,
    patternType=LITERAL), entry=(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)):
    No Authorizer is configured.
"""

from __future__ import annotations

import argparse

from odradek.cli.common import CommandError, add_bootstrap, admin_client, run_command
from odradek.protocol import acl_binding as acl
from odradek.protocol.acl_binding import AccessControlEntry, AclBinding, AclBindingFilter, ResourcePattern

_PATTERNS = {"literal": acl.LITERAL, "prefixed": acl.PREFIXED, "match": acl.MATCH, "any": acl.ANY}
_TYPE_NAMES = {acl.TOPIC: "TOPIC", acl.GROUP: "GROUP", acl.CLUSTER: "CLUSTER",
               acl.TRANSACTIONAL_ID: "TRANSACTIONAL_ID", acl.DELEGATION_TOKEN: "DELEGATION_TOKEN", acl.USER: "USER"}
_NL = "\n"
# AclOperation names with an underscore in Kafka's enum; the others are the upper-cased names.
_ENUM_NAMES = {acl.CLUSTER_ACTION: "CLUSTER_ACTION", acl.DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS",
               acl.ALTER_CONFIGS: "ALTER_CONFIGS", acl.IDEMPOTENT_WRITE: "IDEMPOTENT_WRITE",
               acl.CREATE_TOKENS: "CREATE_TOKENS", acl.DESCRIBE_TOKENS: "DESCRIBE_TOKENS"}


def add_parser(sub) -> None:
    p = sub.add_parser("acls", help="add, list and remove ACLs",
                       description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    action = p.add_mutually_exclusive_group()
    action.add_argument("--add", action="store_true", help="add the ACLs")
    action.add_argument("--remove", action="store_true", help="remove the ACLs")
    action.add_argument("--list", action="store_true", help="list the ACLs of the resources given (default: all)")
    for flag, what in (("--allow-principal", "principal allowed"), ("--deny-principal", "principal denied")):
        p.add_argument(flag, action="append", default=[], metavar="User:NAME", help=what)
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST", help="host allowed (default *)")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST", help="host denied (default *)")
    p.add_argument("--operation", action="append", default=[], metavar="OP",
                   help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                        "AlterConfigs, IdempotentWrite, All (default All)")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC", help="a topic (repeatable)")
    p.add_argument("--group", action="append", default=[], metavar="GROUP", help="a consumer group (repeatable)")
    p.add_argument("--transactional-id", action="append", default=[], metavar="ID",
                   help="a transactional id (repeatable)")
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument("--resource-pattern-type", default="literal", choices=sorted(_PATTERNS),
                   help="literal (default), prefixed; match or any to list or remove")
    p.add_argument("--principal", action="append", default=[], metavar="User:NAME",
                   help="with --list: only this principal's ACLs")
    p.add_argument("--producer", action="store_true", help="the ACLs a producer needs")
    p.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs")
    p.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster")
    p.add_argument("--force", action="store_true", help="remove without asking")


def run(args) -> int:
    return run_command("acls", _run, args)


def _run(args) -> int:
    from odradek.client import BrokerError

    try:
        return _act(args)
    except BrokerError as e:
        raise CommandError(refusal_text(e)) from None


def _act(args) -> int:
    if not (args.add or args.remove or args.list):
        raise CommandError("Command must include exactly one action: --list, --add, --remove.")
    pattern_type = _PATTERNS[args.resource_pattern_type]
    with admin_client(args) as admin:
        if args.list:
            _list(admin, args, _resources(args, pattern_type, required=False))
        elif args.add:
            if pattern_type not in (acl.LITERAL, acl.PREFIXED):
                raise CommandError(f"A '--resource-pattern-type' value of '{args.resource_pattern_type.upper()}' "
                                   "is not valid when adding acls.")
            _add(admin, _resource_acls(args, pattern_type), pattern_type)
        else:
            _remove(admin, args, _resource_acls(args, pattern_type))
    return 0


def pattern_text(resource_type: int, name: str | None, pattern_type: int) -> str:
    """Kafka's ``ResourcePattern.toString``."""
    return (f"ResourcePattern(resourceType={_TYPE_NAMES.get(resource_type, 'ANY')}, "
            f"name={'<any>' if name is None else name}, patternType={acl.PATTERN_TYPE_NAMES[pattern_type]})")


def entry_text(e: AccessControlEntry) -> str:
    """Kafka's ``AccessControlEntry.toString``: the enum names (READ, CLUSTER_ACTION, ALLOW)."""
    return (f"(principal={e.principal}, host={e.host}, operation={_operation_name(e.operation)}, "
            f"permissionType={acl.PERMISSION_NAMES[e.permission_type].upper()})")


def binding_text(b: AclBinding) -> str:
    """Kafka's ``AclBinding.toString``."""
    p = b.pattern
    return f"(pattern={pattern_text(p.resource_type, p.name, p.pattern_type)}, entry={entry_text(b.entry)})"


def filter_text(f: AclBindingFilter) -> str:
    """Kafka's ``AclBindingFilter.toString`` (``<any>`` for a field that matches every value)."""
    resource = _TYPE_NAMES.get(f.resource_type, "ANY")
    operation = "ANY" if f.operation == acl.ANY else _operation_name(f.operation)
    permission = "ANY" if f.permission_type == acl.ANY else acl.PERMISSION_NAMES[f.permission_type].upper()
    return (f"(patternFilter=ResourcePatternFilter(resourceType={resource}, "
            f"name={'<any>' if f.name is None else f.name}, "
            f"patternType={acl.PATTERN_TYPE_NAMES.get(f.pattern_type, 'UNKNOWN')}), "
            f"entryFilter=(principal={f.principal or '<any>'}, host={f.host or '<any>'}, operation={operation}, "
            f"permissionType={permission}))")


def refusal_text(error) -> str:
    """A BrokerError of the ACL calls in Kafka's names: ``CODE for <binding>: message``."""
    name = getattr(error.code, "name", f"error {error.code}")
    subject = error.subject
    if isinstance(subject, AclBinding):
        name += f" for {binding_text(subject)}"
    elif isinstance(subject, AclBindingFilter):
        name += f" for {filter_text(subject)}"
    return f"{name}: {error.message}" if error.message else name


def _operation_name(operation: int) -> str:
    return _ENUM_NAMES.get(operation) or acl.OPERATION_NAMES[operation].upper()


def _block(entries) -> str:
    return f"{_NL.join(chr(9) + entry_text(e) for e in sorted(entries, key=entry_text))} {_NL}"


def _resources(args, pattern_type: int, required: bool = True) -> list[tuple[int, str]]:
    """``[(resource type, name)]`` of the resource flags; the cluster only with literal patterns."""
    out = [(acl.TOPIC, t.strip()) for t in args.topic]
    if pattern_type == acl.LITERAL and (args.cluster or args.idempotent):
        out.append((acl.CLUSTER, acl.CLUSTER_NAME))
    out += [(acl.GROUP, g.strip()) for g in args.group]
    out += [(acl.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if not out and required:
        raise CommandError("You must provide at least one resource: --topic <topic> or --cluster or --group <group>")
    return list(dict.fromkeys(out))


def _principals(values) -> list[str]:
    out = []
    for text in values:
        kind, sep, name = text.strip().partition(":")
        if not sep or not kind or not name:
            raise CommandError(f"Could not parse principal from `{text}` (expected <type>:<name>, e.g. User:alice)")
        out.append(text.strip())
    return out


def _entries(args, operations) -> set[AccessControlEntry]:
    """Kafka's ``getAcl``: principals x operations x hosts, for allow and for deny."""
    out = set()
    for principals, hosts, permission in ((args.allow_principal, args.allow_host, acl.ALLOW),
                                          (args.deny_principal, args.deny_host, acl.DENY)):
        names = _principals(principals)
        for principal in names:
            for op in operations:
                for host in ([h.strip() for h in hosts] or [acl.WILDCARD_HOST]):
                    out.add(AccessControlEntry(principal, host, op, permission))
    return out


def _resource_acls(args, pattern_type: int) -> dict[tuple[int, str], set[AccessControlEntry]]:
    """Kafka's ``getResourceFilterToAcls``: the entries of each resource named."""
    resources = _resources(args, pattern_type)
    out: dict[tuple[int, str], set] = {}
    if not args.producer and not args.consumer:
        try:
            operations = {acl.code_of(acl.OPERATION_NAMES, op.strip()) for op in args.operation} or {acl.ALL}
        except ValueError as e:
            raise CommandError(f"--operation: {e}") from None
        out = {r: _entries(args, operations) for r in resources}
    if args.producer:
        for r in resources:
            if r[0] == acl.TOPIC:
                out[r] = _entries(args, {acl.WRITE, acl.DESCRIBE, acl.CREATE})
            elif r[0] == acl.TRANSACTIONAL_ID:
                out[r] = _entries(args, {acl.WRITE, acl.DESCRIBE})
            elif r[0] == acl.CLUSTER and args.idempotent:
                out[r] = _entries(args, {acl.IDEMPOTENT_WRITE})
    if args.consumer:
        for r in resources:
            if r[0] == acl.TOPIC:
                out[r] = out.get(r, set()) | _entries(args, {acl.READ, acl.DESCRIBE})
            elif r[0] == acl.GROUP:
                out[r] = out.get(r, set()) | _entries(args, {acl.READ})
    for (rtype, _), entries in out.items():
        valid = acl.SUPPORTED_OPERATIONS[rtype] | {acl.ALL}
        if any(e.operation not in valid for e in entries):
            names = ", ".join(sorted(acl.OPERATION_NAMES[o] for o in valid))
            raise CommandError(f"ResourceType {_TYPE_NAMES[rtype]} only supports operations {names}")
    return out


def _add(admin, resource_acls, pattern_type: int) -> None:
    if any(not entries for entries in resource_acls.values()):
        raise CommandError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    for (rtype, name), entries in resource_acls.items():
        pattern = ResourcePattern(rtype, name, pattern_type)
        print(f"Adding ACLs for resource `{pattern_text(rtype, name, pattern_type)}`: {_NL} {_block(entries)}")
        results = admin.create_acls([AclBinding(pattern, e) for e in entries])
        failed = [err for err in results.values() if err is not None]
        if failed:
            raise CommandError(refusal_text(failed[0]))


def _list(admin, args, resources) -> None:
    pattern_type = _PATTERNS[args.resource_pattern_type]
    filters = [AclBindingFilter(rtype, name, pattern_type) for rtype, name in resources] or [AclBindingFilter()]
    found: dict[ResourcePattern, set] = {}
    for flt in filters:
        for b in admin.describe_acls(flt):
            found.setdefault(b.pattern, set()).add(b.entry)
    principals = _principals(args.principal)
    groups = [(None, found)] if not principals else [
        (p, {r: {e for e in es if e.principal == p} for r, es in found.items()}) for p in principals]
    for principal, by_resource in groups:
        if principal is not None:
            print(f"ACLs for principal `{principal}`")
        for r, entries in sorted(by_resource.items(), key=lambda kv: (kv[0].resource_type, kv[0].name)):
            if entries:
                text = pattern_text(r.resource_type, r.name, r.pattern_type)
                print(f"Current ACLs for resource `{text}`: {_NL} {_block(entries)}")


def _remove(admin, args, resource_acls) -> None:
    pattern_type = _PATTERNS[args.resource_pattern_type]
    for (rtype, name), entries in resource_acls.items():
        text = pattern_text(rtype, name, pattern_type)
        if not entries:
            question = f"Are you sure you want to delete all ACLs for resource filter `{text}`? (y/n)"
            filters = [AclBindingFilter(rtype, name, pattern_type)]
        else:
            question = (f"Are you sure you want to remove ACLs: {_NL} {_block(entries)} from resource filter "
                        f"`{text}`? (y/n)")
            filters = [AclBindingFilter(rtype, name, pattern_type, e.principal, e.host, e.operation, e.permission_type)
                       for e in entries]
        if not args.force:
            print(question)
            if _answer() != "y":
                continue
        admin.delete_acls(filters)


def _answer() -> str:
    """The user's answer to a question, lower-cased; "" at the end of the input."""
    try:
        return input().strip().lower()
    except EOFError:
        return ""
