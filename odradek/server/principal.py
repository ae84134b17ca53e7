"""Who is on the other end of a connection: Kafka's ``KafkaPrincipal``.

A principal is a type and a name, written ``User:alice`` (``KafkaPrincipal.toString``). Every
broker connection starts as ``User:ANONYMOUS`` (a PLAINTEXT listener, or an SSL listener whose
client sent no certificate); TLS replaces it with the name that ``ssl.principal.mapping.rules``
makes of the client certificate's subject (``server/ssl_principal_mapper.py``), SASL with the
authenticated user. Authorizers compare principals by value.
"""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True)
class KafkaPrincipal:
    """``principal_type:name``; parse one written that way with ``KafkaPrincipal.parse``."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> "KafkaPrincipal":
        """``User:alice`` -> KafkaPrincipal("User", "alice"); ValueError without a colon
        (Kafka's ``SecurityUtils.parseKafkaPrincipal``: the name may itself hold colons)."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type:
            raise ValueError(f"expected a principal as Type:name, got {text!r}")
        return cls(principal_type, name)

    @classmethod
    def user(cls, name: str) -> "KafkaPrincipal":
        return cls(USER_TYPE, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
