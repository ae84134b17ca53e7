"""Client quota configs where Kafka keeps them in ZooKeeper mode (``AdminZkClient``)::

    /config/users/<user>                      {"version":1,"config":{"producer_byte_rate":"1024",...}}
    /config/users/<user>/clients/<client-id>  the same, for that user's client id
    /config/clients/<client-id>               the same, for a client id of any user

``<user>`` and ``<client-id>`` are Kafka's sanitized names (``scram_credentials.sanitize``);
``<default>`` names the default entity (``/config/users/<default>``,
``/config/users/<user>/clients/<default>``, ``/config/clients/<default>``). A user's znode also
holds its SCRAM credentials: writes here keep every key that is not a quota.

An entity is a sorted tuple of ``(entity type, name)`` pairs, as the protocol's
``ClientQuotaEntity`` map: entity types ``user`` and ``client-id``, a name of None for the
default, e.g. ``(("client-id", "greedy"),)`` or ``(("client-id", None), ("user", "alice"))``.
After a write the caller announces ``entity_path(entity)`` through ``/config/changes``
(``ConfigChangeListener.notify``) so every broker re-reads its quotas.

Values are kept as Kafka's ``ZkAdminManager.alterClientQuotas`` writes them: the byte rates
(LONG) as whole numbers (``"1024"``), ``request_percentage`` (DOUBLE) as a decimal.
"""

from __future__ import annotations

from urllib.parse import unquote

from odradek.metadata import layout
from odradek.metadata.errors import MalformedMetadataError, NoNodeError
from odradek.server.scram_credentials import sanitize

USER = "user"
CLIENT_ID = "client-id"
DEFAULT = "<default>"
USERS = "/config/users"
CLIENTS = "/config/clients"

# Kafka's QuotaConfig: key -> is it a whole number (LONG) rather than a DOUBLE
QUOTA_KEYS = {"producer_byte_rate": True, "consumer_byte_rate": True, "request_percentage": False}


class QuotaConfigError(ValueError):
    """A bad entity or value: Kafka answers INVALID_REQUEST with this message."""


def make_entity(user=..., client_id=...) -> tuple:
    """An entity from ``user`` and ``client_id`` (leave one out: not part of the entity;
    None: the default)."""
    pairs = []
    if client_id is not ...:
        pairs.append((CLIENT_ID, client_id))
    if user is not ...:
        pairs.append((USER, user))
    return tuple(pairs)


def _name(name: str | None) -> str:
    return DEFAULT if name is None else sanitize(name)


def _unname(sanitized: str) -> str | None:
    return None if sanitized == DEFAULT else unquote(sanitized)


def entity_path(entity: tuple) -> str:
    """The entity's path below ``/config`` (``users/alice/clients/c1``, ``clients/<default>``).
    ``QuotaConfigError`` for an entity that is not a user, a client id or both."""
    parts = dict(entity)
    if len(parts) != len(entity) or not parts or set(parts) - {USER, CLIENT_ID}:
        raise QuotaConfigError("Invalid client quota entity")
    for kind, name in entity:
        if name == "":
            raise QuotaConfigError(f"Empty {kind} not supported")
    if USER in parts and CLIENT_ID in parts:
        return f"users/{_name(parts[USER])}/clients/{_name(parts[CLIENT_ID])}"
    if USER in parts:
        return f"users/{_name(parts[USER])}"
    return f"clients/{_name(parts[CLIENT_ID])}"


def entity_of_path(path: str) -> tuple | None:
    """The entity of a path below ``/config`` (the inverse of ``entity_path``), or None."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "users" and parts[1]:
        return make_entity(user=_unname(parts[1]))
    if len(parts) == 2 and parts[0] == "clients" and parts[1]:
        return make_entity(client_id=_unname(parts[1]))
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients" and parts[1] and parts[3]:
        return make_entity(user=_unname(parts[1]), client_id=_unname(parts[3]))
    return None


def read_config(store, path: str) -> dict[str, str]:
    """Every config at ``/config/<path>`` (quotas and anything else), {} if none. A parent
    made empty for its children (``users/<u>`` above ``users/<u>/clients/<c>``) or a znode
    that is not a config holds none."""
    try:
        data = store.get("/config/" + path)[0]
        return layout.decode_config(data, path) if data else {}
    except (NoNodeError, MalformedMetadataError):
        return {}


def quotas_of(config: dict[str, str]) -> dict[str, float]:
    """The quota keys of a config as numbers (a value that is not a number is left out)."""
    out = {}
    for key in QUOTA_KEYS.keys() & config.keys():
        try:
            out[key] = float(config[key])
        except ValueError:
            continue
    return out


def entity_quotas(store, entity: tuple) -> dict[str, float]:
    return quotas_of(read_config(store, entity_path(entity)))


def format_value(key: str, value: float) -> str:
    """``value`` as Kafka stores ``key``; ``QuotaConfigError`` for an unknown key or a byte
    rate that is not a whole number."""
    whole = QUOTA_KEYS.get(key)
    if whole is None:
        raise QuotaConfigError(f"Invalid configuration key {key}")
    if not whole:
        return repr(float(value))
    rounded = int(value + 1e-6)
    if abs(rounded - value) > 1e-6:
        raise QuotaConfigError(f"Configuration {key} must be a LONG value")
    return str(rounded)


def alter(store, entity: tuple, ops: list[tuple[str, float | None]], validate_only: bool = False) -> None:
    """Apply ``ops`` (``(key, value)``, None removes the key) to ``entity``'s znode in one
    write, keeping its other keys; with ``validate_only`` only check them."""
    path = entity_path(entity)
    config = read_config(store, path)
    for key, value in ops:
        if value is None:
            config.pop(key, None)
        else:
            config[key] = format_value(key, value)
    if validate_only:
        return
    znode, data = "/config/" + path, layout.encode_config(config)
    try:
        store.set(znode, data)
    except NoNodeError:
        parent = znode.rsplit("/clients/", 1)[0]
        if parent != znode and store.exists(parent) is None:
            # an empty config, not empty bytes: readers of the user's znode (SCRAM) parse it
            store.create(parent, layout.encode_config({}), make_parents=True)
        store.create(znode, data, make_parents=True)


def _children(store, path: str) -> list[str]:
    try:
        return store.children(path)
    except NoNodeError:
        return []


def all_quotas(store) -> dict[tuple, dict[str, float]]:
    """Every entity that has a quota, with its quotas."""
    out = {}
    paths = [f"clients/{c}" for c in _children(store, CLIENTS)]
    for user in _children(store, USERS):
        paths.append(f"users/{user}")
        paths += [f"users/{user}/clients/{c}" for c in _children(store, f"{USERS}/{user}/clients")]
    for path in paths:
        entity = entity_of_path(path)
        quotas = quotas_of(read_config(store, path)) if entity is not None else {}
        if quotas:
            out[entity] = quotas
    return out
