"""A failed SASL authentication on a broker connection: logged, answered late, then closed.

What Kafka does (``Selector`` with ``SaslServerAuthenticator``, KIP-306):

- every failure is logged at INFO, one line each, under
  ``org.apache.kafka.common.security.authenticator``; odradek's logger is
  ``odradek.security.authenticator`` (under ``odradek``, so the BROKER_LOGGER resource of
  ``server/broker_loggers.py`` can change its level at run time). The line names the client's
  address, the mechanism and the user name the client gave, if any (quoted with ``repr``: a
  name is the client's text and may hold line breaks), and the reason; never a password or a
  token. Nothing here suppresses repeats: only the logging configuration does;
- the error response (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM,
  ILLEGAL_SASL_STATE) is held for ``connection.failed.authentication.delay.ms`` (default 100)
  and then written, and the connection closed right after it. A client guessing passwords one
  connection after another learns each answer only after the delay; meanwhile the connection
  serves nothing more (``SaslServerAuthenticator`` drops what else arrives). The delay is an
  ``asyncio.sleep`` in a waiting handler (``connection.py`` writes the response when it is
  done and then closes, seeing ``CloseAfterResponse``): the event loop never blocks on it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

log = logging.getLogger("odradek.security.authenticator")


@dataclass(frozen=True)
class CloseAfterResponse:
    """A waiting handler's result: write ``response`` (a response body, as a handler returns
    one), then close the connection, logging ``reason`` at DEBUG (the INFO line was logged
    when the authentication failed)."""

    response: object
    reason: str


def log_failure(client: str, mechanism: str | None, user: str | None, reason: str,
                reauthentication: bool = False) -> None:
    """One INFO line for one failed authentication (see the module docstring)."""
    log.info("Failed %sauthentication with %s (mechanism %s, user %s): %s",
             "re-" if reauthentication else "", client, mechanism or "none",
             repr(user) if user is not None else "unknown", reason)


async def delayed_response(response, reason: str, delay_ms: int) -> CloseAfterResponse:
    """``response`` once ``delay_ms`` has passed, for the connection to write and then close."""
    if delay_ms > 0:
        await asyncio.sleep(delay_ms / 1000)
    return CloseAfterResponse(response, reason)
