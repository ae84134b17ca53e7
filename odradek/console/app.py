"""The console's web app (aiohttp): the pages, their JSON API, and the static files.

Pages, each a bookmarkable address serving the same HTML shell (static/index.html), which
the browser's scripts (static/js/) fill from the API and refresh every few seconds:

    /               the cluster overview        GET  /api/cluster
    /brokers        the brokers                 GET  /api/brokers
    /topics         the topics                  GET  /api/topics         POST   /api/topics (create)
    /topics/<name>  one topic                   GET  /api/topics/<name>  DELETE /api/topics/<name>
                    its message browser         GET  /api/topics/<name>/messages?partition=&offset=|timestamp=&limit=
                    its configs                 POST /api/topics/<name>/configs {"set": {...}, "delete": [...]}
    /groups         the consumer groups         GET  /api/groups
    /groups/<id>    one group                   GET  /api/groups/<id>

Errors come back as JSON ``{"error_code": n, "error": "NAME", "message": "..."}`` with
Kafka's code: the broker's (UNKNOWN_TOPIC_OR_PARTITION, TOPIC_ALREADY_EXISTS, ...) or, for a
request the console refuses itself, INVALID_REQUEST; the HTTP status says who is at fault
(404 unknown, 409 exists, 403 not authorized, 400 other refusals, 503 the cluster did not
answer in time).

Changes (POST, DELETE) take JSON only and, when the browser names an ``Origin``, only from
the console's own: another site's page cannot change the cluster through a console running
on the same machine.
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
    ``sasl.*``), where to listen, and how often to sample and refresh."""

    bootstrap: str
    client: dict = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = 0
    sample_interval: float = DEFAULT_INTERVAL
    refresh_ms: int = DEFAULT_REFRESH_MS


@dataclass
class ConsoleState:
    admin: AsyncAdminClient
    sampler: Sampler
    consumer_settings: dict
    # Every broker seen live, by id: one that goes down stays listed, offline (cluster_view.all_brokers).
    seen_brokers: dict = field(default_factory=dict)


def make_app(config: ConsoleConfig) -> web.Application:
    app = web.Application(middlewares=[_errors, _same_origin_changes])
    app[CONFIG_KEY] = config
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
async def _same_origin_changes(request: web.Request, handler):
    if request.method in ("POST", "DELETE", "PUT", "PATCH"):
        origin = request.headers.get("Origin")
        if origin and origin.split("://", 1)[-1] != request.host:
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
