"""The emulator as a pure ASGI 3 application: routing, authentication and request dispatch.

    /numes/api/v1/   chat/completions, embeddings, generation?id=, images, audio/speech, models
    /osmexo/v1/      chat/completions, completions, embeddings, models
    /tiny/v1/        chat/completions, completions, embeddings, models
    /nodul/api/v1/   chat/completions, embeddings, models

and `audio/transcriptions` under each (`transcription`: OpenAI's endpoint, in no gateway's
documents).

All under an optional `prefix` (and/or the server's `root_path`), so the app can be mounted
inside another ASGI app, e.g. at `/emulator`. Every route needs `Authorization: Bearer <key>`
(any non-empty key) and answers errors in the gateway's own envelope. Generation records of
every request are kept in `app.records` (also `app.generations`, `app.state.records`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from types import SimpleNamespace
from urllib.parse import parse_qs

from .buffered import run_buffered
from .channel import BodyTooLarge, Channel, Receive, Scope, Send, quiet_deliberate_aborts
from .dialects import DIALECTS, Dialect, ErrorReply
from .embeddings import EMBEDDING_MODEL, parse_embedding, run_embeddings
from .generation import Generation
from .numes_media import run_images, run_speech
from .options import Options
from .parsing import (
    IMAGE_INPUT,
    SCENARIOS,
    BadRequest,
    UnknownModel,
    parse_chat,
    parse_completion,
    parse_media,
)
from .records import EmulatorRecord, Registry
from .scenarios import build_script
from .streaming import run_stream
from .transcription import parse_transcription, run_transcription

__all__ = ["EmulatorApp"]

_CREATED = 1_767_225_600  # 2026-01-01, a fixed "created" for the model list


class EmulatorApp:
    """ASGI callable; see the module docstring for routes."""

    def __init__(
        self, options: Options | None = None, *, prefix: str = "", request_options: bool = False
    ) -> None:
        self.options = options or Options()
        self.request_options = request_options  # requests may set knobs (`options`): tests only
        self.prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
        self.records = Registry(finalize_delay_s=self.options.finalize_delay_ms / 1000)
        self.state = SimpleNamespace(records=self.records, options=self.options)
        self._open: set[tuple[asyncio.AbstractEventLoop, Channel]] = set()
        quiet_deliberate_aborts()

    @property
    def generations(self) -> Registry:
        return self.records

    @property
    def active_streams(self) -> list[EmulatorRecord]:
        """Records of requests still generating (streams and buffered)."""
        return self.records.active

    # ---- ASGI entry --------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        channel = Channel(receive, send)
        entry = (asyncio.get_running_loop(), channel)
        self._open.add(entry)
        try:
            await self._dispatch(scope, channel)
        finally:
            self._open.discard(entry)
            await channel.close()
            if channel.closing and not channel.complete:
                channel.abort()

    def close_streams(self) -> None:
        """Stop every exchange still running (thread-safe): streams end as if the client had
        left, so a server can shut down without waiting out a stall. Used by `serve_in_thread`."""
        for loop, channel in list(self._open):
            with contextlib.suppress(RuntimeError):  # that loop is already closed
                loop.call_soon_threadsafe(channel.shut)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    def route_path(self, scope: Scope) -> str:
        """The request path relative to the emulator's root (mount point and prefix removed)."""
        path: str = scope.get("path", "/") or "/"
        for mount in (scope.get("root_path", "") or "", self.prefix):
            mount = mount.rstrip("/")
            if mount and (path == mount or path.startswith(mount + "/")):
                path = path[len(mount) :] or "/"
        return path

    # ---- dispatch ----------------------------------------------------------------------------
    async def _dispatch(self, scope: Scope, channel: Channel) -> None:
        path = self.route_path(scope)
        method: str = scope.get("method", "GET")
        dialect = next(
            (
                d
                for d in DIALECTS.values()
                if path == d.facts.emulator_path or path.startswith(d.facts.emulator_path + "/")
            ),
            None,
        )
        if dialect is None:
            if path in ("/", ""):
                await channel.json(200, self._index())
            else:
                await channel.json(404, {"error": {"code": 404, "message": f"No route {path}"}})
            return
        route = path[len(dialect.facts.emulator_path) :].strip("/")
        wanted = self._routes(dialect).get(route)
        if wanted is None:
            await self._reply(
                channel, dialect.error_reply("not_found", dialect.new_ids(text_completion=False))
            )
            return
        if method != wanted:
            reply = dialect.error_reply(
                "not_found", dialect.new_ids(text_completion=False), "Method Not Allowed"
            )
            await self._reply(
                channel, ErrorReply(405, reply.body, [*reply.headers, ("allow", wanted)])
            )
            return
        if not _authorized(scope):
            await self._reply(
                channel, dialect.error_reply("unauthorized", dialect.new_ids(text_completion=False))
            )
            return
        query = scope.get("query_string", b"").decode("latin-1")
        try:
            body = await channel.read_body() if method == "POST" else b""
            if route == "audio/transcriptions":
                content_type = _header(scope, b"content-type")
                await self._transcribe(dialect, channel, body, query, content_type)
            else:
                await self._handle(dialect, route, channel, body, query)
        except (BadRequest, BodyTooLarge) as exc:
            message = str(exc) or "Request body too large."
            reply = dialect.error_reply(
                "bad_request", dialect.new_ids(text_completion=False), message
            )
            await self._reply(channel, reply)
        except UnknownModel as exc:
            reply = dialect.error_reply(
                "model_not_found", dialect.new_ids(text_completion=False), str(exc)
            )
            await self._reply(channel, reply)

    @staticmethod
    def _routes(dialect: Dialect) -> dict[str, str]:
        routes = {"chat/completions": "POST", "embeddings": "POST", "models": "GET"}
        if dialect.completion_endpoint:
            routes["completions"] = "POST"
        if dialect.facts.generation_records:
            routes["generation"] = "GET"
        if dialect.facts.images:
            routes["images"] = "POST"
        if dialect.facts.speech:
            routes["audio/speech"] = "POST"
        routes["audio/transcriptions"] = "POST"  # in every dialect (`transcription`)
        return routes

    def _options_for(self, *queries: str) -> Options:
        """The knobs for one request: the app's, overridden by the request's own (its URL query,
        its model's suffix) only when `request_options` allows them."""
        options = self.options
        if self.request_options:
            for query in queries:
                options = options.with_overrides(query)
        return options

    async def _reply(self, channel: Channel, reply: ErrorReply) -> None:
        await channel.json(reply.status, reply.body, reply.headers)

    async def _handle(
        self, dialect: Dialect, route: str, channel: Channel, body: bytes, query: str
    ) -> None:
        match route:
            case "models":
                await channel.json(200, self._models(dialect))
            case "generation":
                await self._generation(dialect, channel, query)
            case "embeddings":
                wanted = parse_embedding(body)
                channel.watch()
                await run_embeddings(
                    channel, self.records, dialect, self._options_for(query), wanted
                )
            case "images" | "audio/speech":
                media = parse_media(body, text_field="prompt" if route == "images" else "input")
                options = self._options_for(query, media.model_query)
                channel.watch()
                run = run_images if route == "images" else run_speech
                await run(channel, self.records, options, media)
            case _:
                text_completion = route == "completions"
                request = parse_completion(body) if text_completion else parse_chat(body)
                options = self._options_for(query, request.model_query)
                script = build_script(
                    request,
                    options,
                    reasoning=dialect.reasoning_field is not None and not text_completion,
                    hosted_tools=dialect.hosted_tools,
                    media_output=dialect.media_output,
                )
                gen = Generation(channel, dialect, self.records, options, request, script, route)
                channel.watch()
                await (run_stream if request.stream else run_buffered)(gen)

    async def _transcribe(
        self, dialect: Dialect, channel: Channel, body: bytes, query: str, content_type: str
    ) -> None:
        request = parse_transcription(body, content_type)
        options = self._options_for(query, request.model_query)
        channel.watch()
        await run_transcription(channel, dialect, self.records, options, request)

    async def _generation(self, dialect: Dialect, channel: Channel, query: str) -> None:
        ids = dialect.new_ids(text_completion=False)
        key = (parse_qs(query).get("id") or [""])[0]
        if not key:
            raise BadRequest("Query parameter `id` is required.")
        record = self.records.get(key)
        if record is None or record.dialect != dialect.name:
            reply = dialect.error_reply("not_found", ids, f"Generation {key} not found")
            await self._reply(channel, reply)
            return
        await channel.json(200, record.to_api())

    def _models(self, dialect: Dialect) -> dict[str, object]:
        prompt_price, completion_price = dialect.prices
        data = []
        for name, description in SCENARIOS.items():
            entry: dict[str, object] = {
                "id": f"emulator/{name}",
                "object": "model",
                "name": f"Emulator: {name}",
                "created": _CREATED,
                "owned_by": "emulator",
                "description": description,
                "context_length": 32768,
            }
            reasoning = dialect.reasoning_field is not None and name in ("reasoning", "length")
            inputs = ["text", "image"] if name in IMAGE_INPUT else ["text"]
            if name == "title":
                entry["purpose"] = "title"  # it answers any chat, but with a title
            if dialect.facts.images:
                outputs = {"image": ["image"], "audio": ["text", "audio"]}.get(name, ["text"])
                entry["architecture"] = {"input_modalities": inputs, "output_modalities": outputs}
            elif name in IMAGE_INPUT:
                entry["architecture"] = {"input_modalities": inputs, "output_modalities": ["text"]}
            if dialect.listed_prices:
                entry["pricing"] = {
                    "prompt": f"{prompt_price:.10f}",
                    "completion": f"{completion_price:.10f}",
                }
            else:
                entry["capabilities"] = {"reasoning": reasoning, "tools": True, "streaming": True}
            data.append(entry)
        data.append(self._embedding_model(dialect))
        return {"object": "list", "data": data}

    @staticmethod
    def _embedding_model(dialect: Dialect) -> dict[str, object]:
        entry: dict[str, object] = {
            "id": EMBEDDING_MODEL,
            "object": "model",
            "name": "Emulator: embedding",
            "created": _CREATED,
            "owned_by": "emulator",
            "description": "Hashed word and character-trigram vectors (POST /embeddings).",
        }
        if dialect.listed_prices:
            entry["architecture"] = {
                "input_modalities": ["text"],
                "output_modalities": ["embeddings"],
            }
            entry["pricing"] = {"prompt": f"{dialect.prices[0]:.10f}", "completion": "0"}
        return entry

    def _index(self) -> dict[str, object]:
        return {
            "object": "emulator",
            "gateways": {d.name: self.prefix + d.facts.emulator_path for d in DIALECTS.values()},
            "scenarios": list(SCENARIOS),
            "time": time.time(),
        }


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return ""


def _authorized(scope: Scope) -> bool:
    scheme, _, token = _header(scope, b"authorization").partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip())
