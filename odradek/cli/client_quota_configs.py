"""``odradek configs --entity-type users|clients``: client quotas, as ``kafka-configs.sh``
manages them over ``--bootstrap-server`` (AlterClientQuotas, DescribeClientQuotas).

    odradek configs --entity-type clients --entity-name greedy --alter \\
        --add-config producer_byte_rate=204800,consumer_byte_rate=409600
    odradek configs --entity-type users --entity-default --alter --delete-config consumer_byte_rate
    odradek configs --entity-type users --entity-name alice --describe
    # Quota configs for user-principal 'alice' are producer_byte_rate=1024.0
    odradek configs --user alice --client c1 --alter --add-config request_percentage=50

Keys: ``producer_byte_rate``, ``consumer_byte_rate`` (bytes/s, whole numbers) and
``request_percentage``. As Kafka's ConfigCommand: a user's quotas and SCRAM credentials are not
altered in one command; a client takes quota keys only; deleting a key that is not set is
refused ("Invalid config(s): k"). ``--describe`` shows exactly the entity named (a filter of
only its types, Kafka's ``containsOnly``); without a name, every entity of that type.
"""

from __future__ import annotations

from odradek.cli.common import CommandError, parse_pairs, print_json, split_top_level
from odradek.protocol.scram import MECHANISMS

QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
_WORDS = {"user": "user-principal", "client-id": "client-id"}


def involves_quotas(args) -> bool:
    """Whether an ``--alter`` of users names any quota key (else it is SCRAM's business)."""
    keys = [*parse_pairs(args.add_config, "--add-config", split_commas=True),
            *(k for item in args.delete_config for k in split_top_level(item))]
    return any(k in QUOTA_KEYS for k in keys)


def alter(admin, entity: dict, args) -> int:
    """Set and delete ``entity``'s quotas (``{"user": name or None for the default, ...}``)."""
    from odradek.client.admin_quotas import ClientQuotaAlteration

    to_set = parse_pairs(args.add_config, "--add-config", split_commas=True)
    to_delete = [k for item in args.delete_config for k in split_top_level(item)]
    if not to_set and not to_delete:
        raise CommandError("--alter needs --add-config or --delete-config")
    _check_keys(entity, [*to_set, *to_delete])
    values = {}
    for key, text in to_set.items():
        try:
            values[key] = float(text)
        except ValueError:
            raise CommandError(f"Cannot parse quota configuration value for {key}: {text}") from None
    current = _described(admin, entity, exact=True).get(_key(entity), {})
    unset = [k for k in to_delete if k not in current]
    if unset:
        raise CommandError(f"Invalid config(s): {','.join(unset)}")
    ops = [*values.items(), *((k, None) for k in to_delete)]
    errors = [e for e in admin.alter_client_quotas([ClientQuotaAlteration(entity, ops)]).values() if e is not None]
    if errors:
        raise CommandError("; ".join(str(e) for e in errors))
    print(f"Completed updating config for {_describe_entity(entity, short=True)}.")
    return 0


def _check_keys(entity: dict, keys) -> None:
    scram = [k for k in keys if k in MECHANISMS]
    unknown = [k for k in keys if k not in MECHANISMS and k not in QUOTA_KEYS]
    if "client-id" in entity and (scram or unknown):
        raise CommandError("Only quota configs can be added for 'clients' using --bootstrap-server. "
                           f"Unexpected config names: {', '.join(unknown + scram)}")
    if unknown:
        raise CommandError("Only quota and SCRAM credential configs can be added for 'users' using "
                           f"--bootstrap-server. Unexpected config names: {', '.join(unknown)}")
    if scram:
        raise CommandError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' "
                           "using --bootstrap-server.")


def _key(entity: dict) -> tuple:
    return tuple(sorted(entity.items()))


def _described(admin, entity: dict, exact: bool) -> dict:
    from odradek.client.admin_quotas import ClientQuotaFilter, ClientQuotaFilterComponent as C

    components = [C.of_entity_type(t) if not exact else C.of_default_entity(t) if n is None else C.of_entity(t, n)
                  for t, n in sorted(entity.items())]
    return admin.describe_client_quotas(ClientQuotaFilter(components, strict=True))


def describe(admin, entity: dict, named: bool, args) -> int:
    """Print each matching entity's quotas as Kafka's ConfigCommand.describeQuotaConfigs."""
    found = _described(admin, entity, exact=named)
    if args.output == "json":
        print_json({"quotas": [{"entity": dict(k), "configs": v} for k, v in sorted(found.items(), key=str)]})
        return 0
    for key, values in sorted(found.items(), key=str):
        text = ", ".join(f"{k}={v}" for k, v in values.items())
        print(f"Quota configs for {_describe_entity(dict(key))} are {text}")
    return 0


def _describe_entity(entity: dict, short: bool = False) -> str:
    parts = []
    for kind in ("user", "client-id"):
        if kind not in entity:
            continue
        word = ("client" if kind == "client-id" else "user") if short else _WORDS[kind]
        name = entity[kind]
        parts.append(f"the default {word}" if name is None else f"{word} '{name}'" if not short else f"{word} {name}")
    return (" and " if short else ", ").join(parts)
