"""SCRAM credentials where Kafka keeps them: ``/config/users/<user>`` in the metadata store.

Layout (Kafka's ``AdminZkClient`` / ``ScramCredentialUtils``; the znode is shared with the
user's other configs, such as quotas, which are kept untouched)::

    /config/users/<sanitized user>  {"version":1,"config":{
        "SCRAM-SHA-512":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096"}}

``<sanitized user>`` is Kafka's ``Sanitizer.sanitize``: URL-encoding that keeps only letters,
digits, ``-``, ``_`` and ``.`` (so ``alice`` stays ``alice``).

Reads go to the store on every authentication (no cache): a credential altered through any
broker, or written by Kafka's own tools into a shared ZooKeeper, is used at the next login.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from odradek.metadata import layout
from odradek.metadata.errors import NoNodeError
from odradek.protocol.scram import MECHANISMS, ScramCredential

USERS = "/config/users"


def sanitize(user: str) -> str:
    return quote(user, safe="").replace("~", "%7E")


def valid_user(user: str) -> bool:
    """Whether ``user`` can name a znode (``.`` and ``..`` cannot, even sanitized)."""
    return user not in ("", ".", "..")


def user_config_path(user: str) -> str:
    return f"{USERS}/{sanitize(user)}"


def user_config(store, user: str) -> dict[str, str]:
    """All of ``user``'s configs (SCRAM credentials and anything else), {} if none."""
    if not valid_user(user):
        return {}
    path = user_config_path(user)
    try:
        return layout.decode_config(store.get(path)[0], path)
    except NoNodeError:
        return {}


def lookup(store, mechanism: str, user: str) -> ScramCredential | None:
    """``user``'s credential for ``mechanism``, or None (no user, or one written wrong)."""
    text = user_config(store, user).get(mechanism)
    if text is None:
        return None
    try:
        return ScramCredential.from_string(text)
    except ValueError:
        return None


def users(store) -> list[str]:
    """Every user with a config znode (Kafka's sanitized names decoded)."""
    try:
        return sorted(unquote(name) for name in store.children(USERS))
    except NoNodeError:
        return []


def mechanisms_of(store, user: str) -> dict[str, ScramCredential]:
    """``user``'s SCRAM credentials by mechanism."""
    out = {}
    for mechanism, text in user_config(store, user).items():
        if mechanism in MECHANISMS:
            try:
                out[mechanism] = ScramCredential.from_string(text)
            except ValueError:
                continue
    return out


def alter(store, user: str, upserts: dict[str, ScramCredential], deletions: list[str]) -> None:
    """Set and delete ``user``'s credentials in one write of its znode, keeping its other
    configs. (Kafka deletes an emptied user znode's contents but keeps the znode.)
    ``ValueError`` for a name that cannot be a znode (``valid_user``)."""
    if not valid_user(user):
        raise ValueError(f"invalid user name {user!r}")
    config = user_config(store, user)
    for mechanism in deletions:
        config.pop(mechanism, None)
    for mechanism, credential in upserts.items():
        config[mechanism] = credential.to_string()
    path = user_config_path(user)
    data = layout.encode_config(config)
    try:
        store.set(path, data)
    except NoNodeError:
        store.create(path, data, make_parents=True)
