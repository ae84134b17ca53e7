"""The admin client's SCRAM credentials, as Kafka's ``Admin.describeUserScramCredentials``
and ``Admin.alterUserScramCredentials`` have them.

    await admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("alice", "SCRAM-SHA-512", "alice-secret"),   # iterations 4096
        UserScramCredentialDeletion("bob", "SCRAM-SHA-256"),
    ])  # {"alice": None, "bob": BrokerError(RESOURCE_NOT_FOUND ...)}
    await admin.describe_user_scram_credentials(["alice"])  # {"alice": {"SCRAM-SHA-512": 4096}}

The password never leaves the client: an upsertion sends a random 32-byte salt and the salted
password (PBKDF2 with the mechanism's hash), as Kafka's client does. Results are per user: None
for success, else the broker's error. Describing every user: ``users=None``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from odradek.client.errors import BrokerError
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest, ScramCredentialDeletion, ScramCredentialUpsertion,
)
from odradek.protocol.generated.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest, UserName,
)
from odradek.protocol.scram import DEFAULT_ITERATIONS, MECHANISM_IDS, MECHANISM_TYPES, salted_password


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    user: str
    mechanism: str
    password: str = field(repr=False)
    iterations: int = DEFAULT_ITERATIONS
    salt: bytes | None = field(default=None, repr=False)  # None: 32 random bytes


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    user: str
    mechanism: str


def _mechanism_id(name: str) -> int:
    try:
        return MECHANISM_IDS[name.upper()]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {name!r} (SCRAM-SHA-256 or SCRAM-SHA-512)") from None


class ScramAdmin:
    """Mixed into AsyncAdminClient (uses its ``_cluster`` and ``_timeout``)."""

    async def alter_user_scram_credentials(self, alterations) -> dict[str, BrokerError | None]:
        upsertions, deletions = [], []
        for alteration in alterations:
            mechanism = _mechanism_id(alteration.mechanism)
            if isinstance(alteration, UserScramCredentialDeletion):
                deletions.append(ScramCredentialDeletion(name=alteration.user, mechanism=mechanism))
                continue
            salt = alteration.salt if alteration.salt is not None else os.urandom(32)
            salted = salted_password(MECHANISM_TYPES[mechanism], alteration.password.encode(), salt,
                                     alteration.iterations)
            upsertions.append(ScramCredentialUpsertion(name=alteration.user, mechanism=mechanism,
                                                       iterations=alteration.iterations, salt=salt,
                                                       salted_password=salted))
        request = AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upsertions)
        response = await self._cluster.send(None, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, request, timeout=self._timeout)
        return {r.user: BrokerError(r.error_code, r.error_message, r.user) if r.error_code else None
                for r in response.results}

    async def describe_user_scram_credentials(self, users=None) -> dict[str, dict[str, int] | BrokerError]:
        """Each user's mechanisms and their iterations (never salts or keys); a user without
        credentials maps to its RESOURCE_NOT_FOUND error."""
        names = None if users is None else [UserName(name=u) for u in users]
        response = await self._cluster.send(None, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
                                            DescribeUserScramCredentialsRequest(users=names), timeout=self._timeout)
        if response.error_code:
            raise BrokerError(response.error_code, response.error_message)
        return {r.user: BrokerError(r.error_code, r.error_message, r.user) if r.error_code else
                {MECHANISM_TYPES.get(c.mechanism, str(c.mechanism)): c.iterations for c in r.credential_infos}
                for r in response.results}
