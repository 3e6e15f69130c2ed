"""The chat page, scripted: everything the load benchmark knows about what a browser does.

This is the one module to change when the page or its protocol changes. It follows
`templates/chatapp/*.html` and `static/chatapp/chat.js` step by step:

- sign in: GET the login form (CSRF cookie and token), POST the credentials, follow to `/`;
- the chat page opens the tab's one socket (`/ws/chat/`) as it loads, before anything is sent;
- send: POST the composer form as htmx does (`HX-Request`, the `X-CSRFToken` of the body's
  `hx-headers`, the form's fields `csrfmiddlewaretoken`, `model`, `content`); the answer is the
  new conversation, which htmx swaps into the page (no page load), and the socket is told to
  `watch` it; a follow-up (`open_conversation` first) POSTs with the form's `after` and gets
  the new messages, which htmx appends (the conversation is watched already);
- stream: register the swapped-in streaming answers at their `data-seq` and text, and apply
  deltas (bare arrays), `snapshot`, `done` and `updated` as chat.js does: a seq at or below the
  current one is dropped, one beyond the next is held and a snapshot asked for (at most once a
  second), a snapshot replaces the text, 1 s after a watch a snapshot is asked for any answer none
  covered, a closed socket reconnects with chat.js's backoff; on `done` (and on `updated`) GET
  the answer's fragment, as chat.js's `refresh` does.

How the templates are read is `page`'s (a template change is fixed there); what a tab sees goes
into an `Observation`, and what to make of it is `metrics`' job. Nothing else in the benchmark
knows the page.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine
from typing import Any

import httpx
import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import WebSocketException
from websockets.typing import Origin

from chatapp.ws import page_model

from .observation import CountingConnection, Observation
from .page import FORM_TOKEN, Answer, Page, PageError, parse_answers, parse_page, parse_swap

LOGIN_PATH = "/accounts/login/"
HOME_PATH = "/"
OPEN_CHECK_S = 1.0  # chat.js onopen: then ask for answers no snapshot covered
EARLY_LIMIT = 2000  # chat.js: messages kept for an answer not on the page yet
RETRY_FIRST_S, RETRY_MAX_S = 0.25, 5.0  # chat.js reconnect backoff
USER_AGENT = "gateway-chat-load-benchmark (a scripted chat page)"
# Daphne (Twisted) closes a connection idle for 60 s. A browser sends a request again that met a
# keep-alive connection the server closed meanwhile; httpx does not, so a tab that waited over a
# minute for the others to load (200 tabs on two cores) had its POST fail with ReadError at "go".
# Idle connections are not reused after this long instead (seconds).
KEEPALIVE_EXPIRY_S = 30.0


def _client(base: str, cookies: httpx.Cookies | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=base,
        cookies=cookies,
        trust_env=False,
        timeout=httpx.Timeout(60.0),
        limits=httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY_S),
        headers={"User-Agent": USER_AGENT},
    )


async def sign_in(base: str, username: str, password: str) -> httpx.Cookies:
    """A browser signing in once, its static files fetched (then cached); its cookies."""
    async with _client(base) as client:
        form = await client.get(LOGIN_PATH)
        token = FORM_TOKEN.search(form.text)
        if form.status_code != 200 or token is None:
            raise PageError(f"login page answered {form.status_code}")
        data = {"csrfmiddlewaretoken": token.group(1), "username": username, "password": password}
        data["next"] = ""
        headers = {"Origin": base, "Referer": base + LOGIN_PATH}
        home = await client.post(LOGIN_PATH, data=data, headers=headers, follow_redirects=True)
        page = parse_page(HOME_PATH, home.text)  # raises on the login form shown again
        for asset in page.assets:
            await client.get(asset)
        return client.cookies


class _Stream:
    """One answer the tab streams: chat.js's per-answer state (`chatapp.ws.page_model`, the twin
    of `stream_state.js`), and the observation it goes into."""

    __slots__ = ("answer", "obs", "state")

    def __init__(self, answer: Answer, obs: Observation) -> None:
        self.answer = answer
        self.obs = obs
        self.state = page_model.start(
            answer.generation, seq=answer.seq, settled_end=answer.settled_end, tail=answer.tail
        )


class _Streams:
    """chat.js's `streams`, `early` and `handle`: what the page does with each socket message.
    Replies to send and fragments to fetch are queued for the socket loop to act on."""

    def __init__(self) -> None:
        self.streams: dict[int, _Stream] = {}
        self.early: dict[int, list[dict[str, Any]]] = {}
        self.known: dict[int, Answer] = {}
        self.outbox: list[str] = []
        self.refreshes: list[Answer] = []

    def register(self, answer: Answer, obs: Observation) -> None:
        self.known[answer.generation] = answer
        if answer.status != "streaming":
            return
        self.streams[answer.generation] = _Stream(answer, obs)
        for msg in self.early.pop(answer.generation, []):
            self.handle(msg, time.time())

    def handle(self, msg: dict[str, Any], now: float) -> None:
        if msg.get("t") in ("watching", "gone"):  # about the conversation, not an answer
            return
        generation: int = msg.get("g", -1)
        st = self.streams.get(generation)
        if st is None:
            if msg.get("t") == "updated":
                answer = self.known.get(generation)
                if answer is not None:
                    self.refreshes.append(answer)
                return
            early = self.early.setdefault(generation, [])
            if len(early) < EARLY_LIMIT:
                early.append(msg)
            return
        st.obs.messages += 1
        if msg.get("t") == "delta":
            if msg["seq"] <= st.state.seq:
                st.obs.duplicates += 1
            elif msg["seq"] > st.state.seq + 1:
                st.obs.held += 1
        self._carry_out(st, page_model.receive(st.state, msg, now * 1000), now)

    def _carry_out(self, st: _Stream, step: page_model.Step, now: float) -> None:
        before = len(st.state.content)
        st.state = step.state
        for effect in step.effects:
            match effect:
                case page_model.Append(delta=delta):
                    if delta.get("content"):
                        self._saw_text(st, now)
                    st.obs.seq_times.append((delta["seq"], now))
                case page_model.Replace(snapshot=snapshot):
                    if len(snapshot.get("content") or "") > before:
                        self._saw_text(st, now)
                    st.obs.seq_times.append((snapshot["seq"], now))
                case page_model.Send(message=message):
                    st.obs.snapshot_requests += 1
                    self.outbox.append(orjson.dumps(message).decode())
                case page_model.Finish(done=done):
                    del self.streams[st.answer.generation]
                    st.obs.done_at, st.obs.done_status = now, str(done.get("status"))
                    st.obs.text = st.state.content
                    self.refreshes.append(st.answer)
                case page_model.Refresh():
                    self.refreshes.append(st.answer)

    def _saw_text(self, st: _Stream, now: float) -> None:
        obs = st.obs
        obs.text_times.append(now)
        if obs.first_text_at is None:
            obs.first_text_at, obs.first_text_via = now, "socket"

    def watch_sent(self, asked: float) -> None:
        for st in list(self.streams.values()):
            self._carry_out(st, page_model.watch_sent(st.state, asked * 1000), asked)

    def check_after_open(self, opened: float) -> None:
        now = time.time()
        for st in list(self.streams.values()):
            self._carry_out(st, page_model.after_watch(st.state, opened * 1000, now * 1000), now)


class Tab:
    """One tab of a signed-in browser: the browser's cookies, but connections of its own, as the
    tabs of separate users have (one browser would queue its tabs' requests on six).

    As chat.js does, the tab opens its one socket when the chat page loads, before anything is
    sent, and tells it which conversation the page shows (`watch`) whenever that changes."""

    def __init__(self, base: str, cookies: httpx.Cookies, *, deflate: bool = True) -> None:
        self.base = base
        self.deflate = deflate  # offer permessage-deflate, as browsers do (`--no-deflate`: not)
        self.client = _client(base, cookies)
        self.page: Page | None = None
        self.streams = _Streams()
        self.conversation: int | None = None
        self._visit: _Visit | None = None
        self._ws: ClientConnection | None = None
        self._watched: int | None = None
        self._wire_closed = 0  # bytes of the sockets closed so far
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def socket_open(self) -> bool:
        return self._ws is not None

    async def open_home(self) -> None:
        """Load the chat page (the "New chat" link), leaving the conversation page if any."""
        await self.leave()
        response = await self.client.get(HOME_PATH)
        self.page = parse_page(HOME_PATH, response.text)
        self.conversation = None
        if self.page.socket_path:
            self.spawn(self._keep_socket(self.page.socket_path))

    async def open_conversation(self, conversation: int) -> None:
        """Load a conversation's page (a sidebar link), its socket watching it."""
        await self.leave()
        url = f"/c/{conversation}/"
        response = await self.client.get(url)
        self.page = parse_page(url, response.text)
        self.conversation = conversation
        if self.page.socket_path:
            self.spawn(self._keep_socket(self.page.socket_path))

    async def ask(self, content: str, model: str, obs: Observation) -> None:
        """Send `content` from the loaded page (a new chat, or a follow-up on a conversation's
        page); return once the answer's final fragment is in."""
        page = self.page
        choice = page.option_for(model) if page is not None else None
        if page is None or choice is None:
            raise PageError(f"the page offers no model {model!r}")
        follow_up = self.conversation is not None
        obs.post_start = time.time()
        fields = {"csrfmiddlewaretoken": page.form_token, "model": choice, "content": content}
        if follow_up:
            fields["after"] = page.after
        headers = {**self.htmx_headers("messages"), "HX-Trigger": "composer", "Origin": self.base}
        response = await self.client.post(page.send_path, data=fields, headers=headers)
        obs.post_end = obs.page_at = time.time()
        ok = response.status_code == 200
        if follow_up:  # a refusal is retargeted to the composer's error line
            ok = ok and "HX-Retarget" not in response.headers
            answers = parse_answers(response.text) if ok else []
            swapped = (self.conversation, answers) if answers else None
        else:
            swapped = parse_swap(response.text) if ok else None
        if swapped is None or not swapped[1]:
            raise PageError(f"send answered {response.status_code}: {response.text[:200]!r}")
        self.conversation, answers = swapped
        visit = self._visit = _Visit(self, answers, obs, self._wire_total())
        if self._watched == self.conversation:  # a follow-up: the socket watches it already
            obs.socket_open_at = obs.post_start
        await self._watch()  # htmx swapped the conversation in: chat.js's `init` watches it
        await visit.finished.wait()
        obs.wire_bytes = self._wire_total() - visit.wire_base

    async def leave(self) -> None:
        """Navigate away: the socket closes and pending fetches are dropped."""
        tasks, self._tasks = self._tasks, set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._ws = None
        self._watched = None

    async def aclose(self) -> None:
        await self.leave()
        await self.client.aclose()

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def htmx_headers(self, target: str) -> dict[str, str]:
        url = self.base + (self.page.url if self.page else HOME_PATH)
        csrf = self.page.csrf_header if self.page else ""
        return {
            "HX-Request": "true",
            "HX-Current-URL": url,
            "HX-Target": target,
            "X-CSRFToken": csrf,
            "Referer": url,
        }

    def _wire_total(self) -> int:
        return self._wire_closed + (getattr(self._ws, "wire_bytes", 0) if self._ws else 0)

    # --- The socket (chat.js `connect`, `watch`) -------------------------------------------------

    async def _keep_socket(self, path: str) -> None:
        """One socket for the tab, reopened with backoff when it closes."""
        uri = "ws://" + self.base.removeprefix("http://") + path
        cookie = "; ".join(f"{name}={value}" for name, value in self.client.cookies.items())
        delay = RETRY_FIRST_S
        while True:
            try:
                async with connect(
                    uri,
                    origin=Origin(self.base),
                    additional_headers={"Cookie": cookie},
                    user_agent_header=USER_AGENT,
                    proxy=None,
                    max_size=None,
                    ping_interval=None,
                    open_timeout=60,
                    close_timeout=2,
                    create_connection=CountingConnection,
                    compression="deflate" if self.deflate else None,
                ) as ws:
                    delay = RETRY_FIRST_S
                    self._ws, self._watched = ws, None
                    try:
                        await self._watch()
                        await self._read(ws)
                    finally:
                        self._ws = None
                        self._wire_closed += getattr(ws, "wire_bytes", 0)
            except (OSError, TimeoutError, WebSocketException):
                pass
            if self._visit is not None:
                self._visit.obs.reconnects += 1
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    async def _watch(self) -> None:
        ws, conversation = self._ws, self.conversation
        if ws is None or conversation is None or conversation == self._watched:
            return
        self._watched = conversation
        asked = time.time()
        visit = self._visit
        if visit is not None and visit.obs.socket_open_at is None:
            visit.obs.socket_open_at = asked  # the moment this socket serves the answer
        with contextlib.suppress(WebSocketException):
            await ws.send(orjson.dumps({"t": "watch", "c": conversation}).decode())
        self.streams.watch_sent(asked)
        self.spawn(self._check_after_watch(ws, asked))

    async def _read(self, ws: ClientConnection) -> None:
        async for raw in ws:
            now = time.time()
            try:
                msg = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            for message in page_model.messages_from_wire(msg):
                self.streams.handle(message, now)
            await self._act(ws)

    async def _check_after_watch(self, ws: ClientConnection, asked: float) -> None:
        await asyncio.sleep(OPEN_CHECK_S)
        self.streams.check_after_open(asked)
        with contextlib.suppress(WebSocketException):  # closed meanwhile: the reader reconnects
            await self._act(ws)

    async def _act(self, ws: ClientConnection) -> None:
        streams = self.streams
        while streams.outbox:
            await ws.send(streams.outbox.pop(0))
        for answer in streams.refreshes:
            self.spawn(self._refresh(answer))
        streams.refreshes.clear()

    async def _refresh(self, answer: Answer) -> None:
        """chat.js `refresh` after `done` or `updated`: GET the answer's fragment."""
        visit = self._visit
        headers = self.htmx_headers(f"message-{answer.message}")
        try:
            response = await self.client.get(answer.fragment_path, headers=headers)
            rendered = parse_answers(response.text)
        except httpx.HTTPError as exc:
            rendered = []
            if visit is not None:
                visit.obs.error = visit.obs.error or f"fragment: {exc!r}"
        if visit is None or answer.generation != visit.obs.generation:
            return
        obs = visit.obs
        if obs.fragment_at is not None or obs.done_at is None:
            obs.updated += 1
            return
        obs.fragment_at = time.time()
        obs.fragment_status = rendered[0].status if rendered else "unreadable"
        visit.finished.set()


class _Visit:
    """One answer the tab follows: its observation, and when its final fragment is in."""

    def __init__(self, tab: Tab, answers: list[Answer], obs: Observation, wire_base: int) -> None:
        self.obs = obs
        self.wire_base = wire_base
        self.finished = asyncio.Event()
        mine = answers[-1]
        obs.generation = mine.generation
        if mine.shows_text:
            obs.first_text_at, obs.first_text_via = obs.page_at, "page"
        for answer in answers:
            tab.streams.register(answer, obs if answer is mine else Observation())
        if mine.status != "streaming":  # finished before the page: nothing for us to assemble
            obs.done_at = obs.fragment_at = obs.page_at
            obs.done_status = obs.fragment_status = mine.status
            self.finished.set()
