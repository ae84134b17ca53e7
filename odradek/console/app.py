"""The console's web app (aiohttp): the pages, their JSON API, and the static files.

Pages, each a bookmarkable address serving the same HTML shell (static/index.html), which
the browser's scripts (static/js/) fill from the API and refresh every few seconds:

    /               the cluster overview        GET  /api/cluster
    /brokers        the brokers                 GET  /api/brokers
    /topics         the topics                  GET  /api/topics         POST   /api/topics (create)
    /topics/<name>  one topic                   GET  /api/topics/<name>  DELETE /api/topics/<name>
                    its message browser         GET  /api/topics/<name>/messages?partition=&offset=|timestamp=&limit=
                    its configs                 POST /api/topics/<name>/configs {"set": {...}, "delete": [...]}
    /groups         the groups (classic and     GET  /api/groups
                    KIP-848 consumer groups)
    /groups/<id>    one group                   GET  /api/groups/<id>

Errors come back as JSON ``{"error_code": n, "error": "NAME", "message": "..."}`` with
Kafka's code: the broker's (UNKNOWN_TOPIC_OR_PARTITION, TOPIC_ALREADY_EXISTS, ...) or, for a
request the console refuses itself, INVALID_REQUEST; the HTTP status says who is at fault
(404 unknown, 409 exists, 403 not authorized, 400 other refusals, 503 the cluster did not
answer in time).

The console acts with its own Kafka credentials for everyone who reaches it, so every
request, on every route (pages, API, static files), passes three checks in this order:

1. its ``Host`` is one the console serves (host_check.py: the bind address, loopback names for
   a loopback bind, ``--allowed-host``), else 421 Misdirected Request: a page of another site
   whose name was rebound to the console's address (DNS rebinding) gets nothing;
2. with authentication configured (console_auth.py), it carries the user's password or the
   token, else 401 with ``WWW-Authenticate``;
3. a change (POST, DELETE) is JSON only and, when the browser names an ``Origin``, comes from
   one of the served hosts too: another site's page cannot change the cluster through it.

Answers also tell browsers not to frame the pages (``X-Frame-Options: DENY``, CSP
``frame-ancestors 'none'``), so another site cannot lay them under its own buttons.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from odradek.client.admin import AsyncAdminClient
from odradek.client.errors import BrokerError, KafkaError
from odradek.console import cluster_view, groups_view, message_browser, topics_view
from odradek.console.console_auth import ConsoleAuth
from odradek.console.host_check import AllowedHosts
from odradek.console.request_error import RequestError
from odradek.console.samples import DEFAULT_INTERVAL, Sampler, Samples
from odradek.protocol.generated.error_codes import ErrorCode

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
PAGES = ("/", "/brokers", "/topics", "/topics/{name}", "/groups", "/groups/{group:.+}")
# How often the pages ask for fresh data (the sampler's interval is the finest change they see).
DEFAULT_REFRESH_MS = 5_000
CONFIG_KEY = web.AppKey("config", object)
STATE_KEY = web.AppKey("state", object)
HOSTS_KEY = web.AppKey("hosts", AllowedHosts)
# Sent with every answer: no other site may frame the pages (and so no clicks under its own buttons).
_NO_FRAMING = {"X-Frame-Options": "DENY", "Content-Security-Policy": "frame-ancestors 'none'"}

_STATUS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: 404, ErrorCode.GROUP_ID_NOT_FOUND: 404,
    ErrorCode.TOPIC_ALREADY_EXISTS: 409, ErrorCode.NON_EMPTY_GROUP: 409,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: 403, ErrorCode.GROUP_AUTHORIZATION_FAILED: 403,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: 403, ErrorCode.SASL_AUTHENTICATION_FAILED: 403,
}


@dataclass(frozen=True)
class ConsoleConfig:
    """What a console needs: the cluster's bootstrap servers, keyword arguments for the
    admin client (``security`` among them: Kafka-named ``security.protocol``, ``ssl.*``,
    ``sasl.*``), where to listen, and how often to sample and refresh; the ``Host`` names it
    serves besides its bind address (``allowed_hosts``, host_check.py), who may use it
    (``auth``, console_auth.py; nobody asked by default), and its TLS certificate chain and
    key (PEM files; both or neither)."""

    bootstrap: str
    client: dict = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = 0
    sample_interval: float = DEFAULT_INTERVAL
    refresh_ms: int = DEFAULT_REFRESH_MS
    allowed_hosts: tuple[str, ...] = ()
    auth: ConsoleAuth = field(default_factory=ConsoleAuth)
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    insecure_no_auth: bool = False  # serve a non-loopback bind without authentication, on purpose


@dataclass
class ConsoleState:
    admin: AsyncAdminClient
    sampler: Sampler
    consumer_settings: dict
    # Every broker seen live, by id: one that goes down stays listed, offline (cluster_view.all_brokers).
    seen_brokers: dict = field(default_factory=dict)


def make_app(config: ConsoleConfig) -> web.Application:
    app = web.Application(middlewares=[_served_hosts_only, _authenticated, _errors, _same_origin_changes])
    app[CONFIG_KEY] = config
    app[HOSTS_KEY] = AllowedHosts(config.host, tuple(config.allowed_hosts))
    for page in PAGES:
        app.router.add_get(page, _page)
    app.router.add_get("/favicon.ico", _favicon)
    app.router.add_static("/static/", STATIC)
    app.router.add_get("/api/cluster", _api(
        lambda s, r: cluster_view.overview(s.admin, s.sampler.samples, s.seen_brokers)))
    app.router.add_get("/api/brokers", _api(lambda s, r: cluster_view.brokers(s.admin, s.seen_brokers)))
    app.router.add_get("/api/topics", _api(lambda s, r: topics_view.topics(s.admin, s.sampler.samples)))
    app.router.add_post("/api/topics", _api(_create_topic))
    app.router.add_get("/api/topics/{name}", _api(
        lambda s, r: topics_view.topic(s.admin, r.match_info["name"], s.sampler.samples)))
    app.router.add_delete("/api/topics/{name}", _api(lambda s, r: topics_view.delete_topic(s.admin, r.match_info["name"])))
    app.router.add_post("/api/topics/{name}/configs", _api(_alter_configs))
    app.router.add_get("/api/topics/{name}/messages", _api(
        lambda s, r: message_browser.browse(s.admin, s.consumer_settings, r.match_info["name"], r.query)))
    app.router.add_get("/api/groups", _api(lambda s, r: groups_view.groups(s.admin)))
    app.router.add_get("/api/groups/{group:.+}", _api(
        lambda s, r: groups_view.group(s.admin, r.match_info["group"], s.sampler.samples)))
    app.cleanup_ctx.append(_clients)
    return app


async def _clients(app: web.Application):
    """The admin client and the sampler live as long as the app."""
    config = app[CONFIG_KEY]
    admin = AsyncAdminClient(config.bootstrap, **{"client_id": "odradek-console", **config.client})
    await admin.start()
    sampler = Sampler(lambda: cluster_view.sample_round(admin), Samples(), config.sample_interval)
    sampler.start()
    app[STATE_KEY] = ConsoleState(admin, sampler, {"bootstrap": config.bootstrap,
                                                   "security": config.client.get("security")})
    try:
        yield
    finally:
        await sampler.stop()
        await admin.close()


def _api(view):
    """A JSON endpoint of ``view(state, request)``."""
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(await view(request.app[STATE_KEY], request), dumps=_dumps)

    return handler


async def _create_topic(state: ConsoleState, request: web.Request):
    return await topics_view.create_topic(state.admin, await _body(request))


async def _alter_configs(state: ConsoleState, request: web.Request):
    return await topics_view.alter_topic_configs(state.admin, request.match_info["name"], await _body(request))


async def _body(request: web.Request) -> dict:
    try:
        body = json.loads(await request.text() or "{}")
    except ValueError as e:
        raise RequestError(ErrorCode.INVALID_REQUEST, f"the body is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise RequestError(ErrorCode.INVALID_REQUEST, "the body must be a JSON object")
    return body


async def _page(request: web.Request) -> web.Response:
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    html = html.replace("{{REFRESH_MS}}", str(int(request.app[CONFIG_KEY].refresh_ms)))
    return web.Response(text=html, content_type="text/html", headers={"Cache-Control": "no-store"})


async def _favicon(request: web.Request) -> web.Response:
    return web.FileResponse(STATIC / "favicon.svg", headers={"Content-Type": "image/svg+xml"})


@web.middleware
async def _errors(request: web.Request, handler):
    try:
        return await handler(request)
    except RequestError as e:
        return _error(400, e.code, e.message)
    except groups_view.GroupNotFound as e:
        return _error(404, ErrorCode.GROUP_ID_NOT_FOUND, f"no consumer group {e}")
    except BrokerError as e:
        code = e.code if isinstance(e.code, ErrorCode) else ErrorCode.UNKNOWN_SERVER_ERROR
        return _error(_STATUS.get(code, 503 if e.retriable else 400), code, _broker_message(e, code))
    except KafkaError as e:  # timed out, connection lost: the cluster did not answer
        return _error(503, ErrorCode.REQUEST_TIMED_OUT, str(e) or type(e).__name__)
    except web.HTTPException:  # aiohttp's own answers: no such route, method not allowed
        raise
    except Exception as e:  # noqa: BLE001 - a fault of the console's: said in JSON, logged in full
        log.exception("console: %s %s failed", request.method, request.path)
        return _error(500, ErrorCode.UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}")


@web.middleware
async def _served_hosts_only(request: web.Request, handler):
    """Check 1 (the module's docstring): the ``Host`` named is one this console serves.
    The raw header, not ``request.host``, which makes one up when there is none."""
    hosts = request.headers.getall("Host", [])
    if len(hosts) != 1 or not _serves(request, hosts[0], 443 if request.secure else 80):
        shown = hosts[0] if len(hosts) == 1 else f"{len(hosts)} Host headers"
        answer = _error(421, ErrorCode.INVALID_REQUEST,
                        f"this console does not serve {shown!r} (see odradek console --allowed-host)")
    else:
        try:
            answer = await handler(request)
        except web.HTTPException as e:  # aiohttp's own answers (no such route): framed no more than others
            e.headers.update(_NO_FRAMING)
            raise
    answer.headers.update(_NO_FRAMING)
    return answer


@web.middleware
async def _authenticated(request: web.Request, handler):
    """Check 2: with authentication configured, the request carries its credentials."""
    auth = request.app[CONFIG_KEY].auth
    if auth.admits(request.headers.get("Authorization")):
        return await handler(request)
    answer = _error(401, ErrorCode.SASL_AUTHENTICATION_FAILED, "this console asks who you are")
    for challenge in auth.challenges():
        answer.headers.add("WWW-Authenticate", challenge)
    return answer


def _serves(request: web.Request, host: str, default_port: int) -> bool:
    """Whether ``host`` (a ``Host`` value or an ``Origin``'s host part) names this console,
    which took the request's connection on its local port."""
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    if not isinstance(sockname, tuple) or len(sockname) < 2:
        return False
    return request.app[HOSTS_KEY].permits(host, sockname[1], default_port)


def _same_origin(request: web.Request, origin: str) -> bool:
    """Whether a browser's ``Origin`` (``scheme://host[:port]``) is one of the console's own."""
    scheme, sep, host = origin.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return False  # "null" (a sandboxed frame, a file) and anything else
    return _serves(request, host, 443 if scheme.lower() == "https" else 80)


@web.middleware
async def _same_origin_changes(request: web.Request, handler):
    """Check 3: changes only as JSON, and from the console's own pages."""
    if request.method in ("POST", "DELETE", "PUT", "PATCH"):
        origin = request.headers.get("Origin")
        if origin and not _same_origin(request, origin):
            return _error(403, ErrorCode.INVALID_REQUEST, f"changes only from the console's own pages, not {origin}")
        if request.method == "POST" and request.content_type != "application/json":
            return _error(400, ErrorCode.INVALID_REQUEST, "send changes as application/json")
    return await handler(request)


def _broker_message(error: BrokerError, code: ErrorCode) -> str:
    """The broker's own words when it gave some, else what the error is about."""
    if error.message:
        return error.message
    return f"{code.name} for {error.subject}" if isinstance(error.subject, str) else code.name


def _error(status: int, code: ErrorCode, message: str) -> web.Response:
    return web.json_response({"error_code": int(code), "error": code.name, "message": message}, status=status)


def _dumps(document) -> str:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)
