"""Rendering never blocks the event loop, and always ends (issue 19 item 1).

Model text decides how long markdown takes to render. These are the review's payloads and more
of their kinds: fences naming lexers whose regexes backtrack without end, a task list the old
plugin took quadratic time over, answers streamed so that the live settler would parse them again
and again, and markdown that is slow however it is lexed. Every render runs in the render pool
under its deadline; past it, the text shows as marked plain text. A real Daphne server answers
an anonymous request while such a render runs.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from chatapp.conversations.models import Conversation, Message
from chatapp.rendering import answer_html as answer_render
from chatapp.rendering import pool as render_pool
from chatapp.rendering import pool_jobs
from chatapp.rendering.answer_html import render_key
from chatapp.rendering.highlight import LEXERS, highlighted
from chatapp.rendering.markdown import PLAIN_TEXT_NOTES, doc_id_for
from chatapp.rendering.math import MAX_FORMULA
from chatapp.rendering.pool import RenderPool
from chatapp.streaming.live_blocks import BlockSettler, PartialAnswer
from chatapp.templatetags.chat import answer_html, partial_answer
from tests.multiprocess.servers import Server, User, prepare_database, sign_in, start_server
from tests.waiting import eventually, poll

# A 58-character message that once held the server for 23 s (Pygments' `registry` lexer); at
# ~60 characters it never returned.
REGISTRY = '```registry\n"' + "\\" * 40 + "\n```"
# Other lexers Pygments ships whose regexes backtrack on these (each took over 2 s, most far
# longer), found by running every lexer on a few shapes of input.
CATASTROPHIC = {
    "registry": '"' + "\\" * 40,
    "autoit": " " * 3000 + "x",
    "autohotkey": "\t \n" * 1000,
    "freefem": "\t \n" * 1000,
    "gherkin": "\t \n" * 1000,
    "systemd": " " * 3000 + "x",
    "postscript": "1" * 3000 + ".",
    "zeek": "1" * 3000 + ".",
}
# The shapes that found them, cut to 300 characters: a regex that backtracks exponentially is
# lost at that length already (`registry` at 40). Some allowed lexers are quadratic on the full
# shapes (Python's and C's on 2,000 lines of "\t " take 2 s): the deadline bounds those.
SHAPES = [*CATASTROPHIC.values(), "'" * 3000, '"' * 3000, "(" * 2000, "/*" * 1500, "<" * 2000]
SHORT_SHAPES = [shape[:300] for shape in SHAPES]
TASKS = "- [ ] a\n" * 12_500  # froze every request for 42 s; each later view took 25 s
SLOW_MARKDOWN = "![" * 50_000  # markdown-it's link scan: about 2 s here, any lexer
# A page view's render of it must overrun the test server's 2 s deadline on a quick machine too.
SLOWER_MARKDOWN = "![" * 250_000


@pytest.fixture(scope="module")
def pool() -> Iterator[RenderPool]:
    found = RenderPool(workers=1, deadline=2.0, queue=4)
    yield found
    found.shutdown()


def test_the_registry_fence_renders_at_once_unhighlighted(pool: RenderPool) -> None:
    html = pool.run_sync(pool_jobs.render, REGISTRY, [], "m1")
    assert isinstance(html, str), html  # not stopped at the deadline
    assert '<code class="language-registry">"' + "\\" * 40 in html
    assert '<span class="o">' not in html.split("<code", 1)[1]


@pytest.mark.parametrize("language", CATASTROPHIC)
def test_a_lexer_that_backtracks_is_never_used(pool: RenderPool, language: str) -> None:
    fence = f"```{language}\n{CATASTROPHIC[language]}\n```\n"
    html = pool.run_sync(pool_jobs.render, fence, [], "m1")
    assert isinstance(html, str), html
    assert highlighted(CATASTROPHIC[language], language) == ""


@pytest.mark.parametrize("language", LEXERS)
def test_every_allowed_lexer_is_quick_on_the_shapes_that_break_others(
    pool: RenderPool, language: str
) -> None:
    fences = "".join(f"```{language}\n{shape}\n```\n\n" for shape in SHORT_SHAPES)
    html = pool.run_sync(pool_jobs.render, fences, [], "m1")
    assert isinstance(html, str), html


# Formulas at the longest converted (`MAX_FORMULA`), of the shapes that nest deepest.
FORMULAS = {
    "braces": "{" * 999 + "x" + "}" * 999,
    "fractions": "\\frac{" * 300 + "x" + "}{y}" * 300,
    "roots": "\\sqrt{" * 330 + "x" + "}" * 330,
    "scripts": "x" + "^{x" * 600 + "}" * 600,
    "delimiters": "\\left(" * 300 + "x" + "\\right)" * 300,
    "matrix": "\\begin{matrix}" + "\\\\".join(["&".join(["a"] * 40)] * 40) + "\\end{matrix}",
}


@pytest.mark.parametrize("shape", FORMULAS)
def test_deeply_nested_formulas_render_in_the_pool_within_its_deadline(
    pool: RenderPool, shape: str
) -> None:
    latex = FORMULAS[shape][:MAX_FORMULA]
    html = pool.run_sync(pool_jobs.render, f"$${latex}$$\n\n" * 5, [], "m1")
    assert isinstance(html, str), html  # converted, or shown as its source: not stopped


def test_a_12500_item_task_list_renders_in_linear_time() -> None:
    roomy = RenderPool(workers=1, deadline=20.0, queue=1)  # ~4 s here; the old plugin took 42
    try:
        html = roomy.run_sync(pool_jobs.render, TASKS, [], "m1")
    finally:
        roomy.shutdown()
    assert isinstance(html, str), html
    assert html.count('<li class="task-list-item"><input class="task-list-item-checkbox"') == 12_500


def test_a_render_past_the_deadline_is_marked_plain_text_and_its_process_replaced(
    settings: Any,
) -> None:
    render_pool.shutdown()
    settings.CHAT_RENDER_DEADLINE = 1.0
    try:
        before = render_pool.pool().run_sync(os.getpid)
        rendered = answer_render.render_answer_sync(SLOW_MARKDOWN + "<script>x</script>", [], "m1")
        note = PLAIN_TEXT_NOTES["deadline"]
        assert rendered.html.startswith(f'<p class="render-fallback">{note}</p>')
        assert "&lt;script&gt;x&lt;/script&gt;</code></pre>" in rendered.html
        assert "<script" not in rendered.html
        assert render_pool.pool().replaced == 1
        after = render_pool.pool().run_sync(os.getpid)
        assert isinstance(after, int)
        assert after != before
    finally:
        render_pool.shutdown()


# --- The live settler: work linear in the answer --------------------------------------------------


async def direct(function: Any, *args: object) -> object:
    return function(*args)


def parsed_for(text: str, delta: int = 40) -> int:
    """Characters the settler parses streaming `text` in `delta`-character pieces."""

    async def run() -> int:
        settler = BlockSettler(run=direct)
        for start in range(0, len(text), delta):
            settler.feed(text[start : start + delta])
            await settler.step()
        await settler.finish()
        return settler.parsed

    return asyncio.run(run())


STRUCTURES = {
    "list": lambda n: "".join(f"- item number {i} of the list\n" for i in range(n)),
    "task list": lambda n: "".join(f"- [ ] task {i}\n" for i in range(n)),
    "nested lists": lambda n: "- top\n" + "".join(f"  - inner {i}\n" for i in range(n)),
    "one item of many lines": lambda n: "- item\n" + "".join(f"  line {i}\n" for i in range(n)),
    "quote": lambda n: "".join(f"> quoted line {i}\n" for i in range(n)),
    "nested quotes": lambda n: "".join(f"> > > - deep {i}\n" for i in range(n)),
    "quote of paragraphs": lambda n: "".join(f"> para {i}\n>\n" for i in range(n)),
    "table": lambda n: "| a | b |\n|---|---|\n" + "".join(f"| {i} | x |\n" for i in range(n)),
    "paragraph": lambda n: "".join(f"a line of prose {i}\n" for i in range(n)),
    # Not cut line by line (a formula may span lines): settled whole, parsed a bounded number
    # of times all the same.
    "paragraph of formulas": lambda n: "".join(
        f"a line with $x_{{{i}}}^2$ in it\n" for i in range(n)
    ),
}


@pytest.mark.parametrize("name", STRUCTURES)
def test_the_settler_parses_an_answer_a_bounded_number_of_times(name: str) -> None:
    small, large = STRUCTURES[name](100), STRUCTURES[name](1000)
    small_work, large_work = parsed_for(small), parsed_for(large)
    # Linear: ten times the answer, about ten times the work (a whole-block parse per delta
    # made it a hundred), and a bounded number of parses of each character.
    assert large_work / small_work < 14, (small_work, large_work)
    assert large_work < 40 * len(large), large_work


def test_a_40k_list_in_40_character_deltas_is_parsed_about_once() -> None:
    text = "".join(f"- list item {i:05d} of forty characters.\n" for i in range(1050))
    assert len(text) > 40_000
    assert parsed_for(text) < 3 * len(text)  # it was 20 million characters (121 s of CPU)


# --- Page views read the stored render ------------------------------------------------------------


@pytest.mark.django_db
def test_a_page_shows_the_stored_render_and_renders_only_what_has_none(
    alice: Any, settings: Any
) -> None:
    settings.CHAT_RENDER_PAGE_WAIT = 60.0  # the pool's first process starts meanwhile
    conversation = Conversation.objects.create(user=alice, title="t")
    answer = Message.objects.create(conversation=conversation, role="assistant", content="*new*")
    answer.html, answer.html_key = (
        "<p>stored</p>",
        answer_render.render_key("*new*", [], doc_id_for(answer.pk)),
    )
    assert answer_html(answer) == "<p>stored</p>"  # what it shows is not rendered again

    answer.html, answer.html_key = "", ""  # a row from before stored renders
    assert answer_html(answer) == "<p><em>new</em></p>\n"
    answer.refresh_from_db()
    assert (answer.html, answer.html_key) == (
        "<p><em>new</em></p>\n",
        render_key("*new*", [], doc_id_for(answer.pk)),
    )

    answer.content = "*edited*"  # the key no longer matches: rendered again
    assert answer_html(answer) == "<p><em>edited</em></p>\n"


@pytest.mark.django_db(transaction=True)
def test_a_page_does_not_wait_for_a_slow_render_which_is_kept_for_the_next(
    alice: Any, settings: Any
) -> None:
    settings.CHAT_RENDER_PAGE_WAIT = 0.0  # every sync view shares the thread a wait would hold
    conversation = Conversation.objects.create(user=alice, title="t")
    answer = Message.objects.create(conversation=conversation, role="assistant", content="*a*")
    assert answer_html(answer).startswith(
        f'<p class="render-fallback">{PLAIN_TEXT_NOTES["pending"]}</p>'
    )

    def stored() -> bool:
        answer.refresh_from_db()
        return answer.html == "<p><em>a</em></p>\n"

    poll(stored, what="the render to be kept", within=60)
    assert answer_html(answer) == "<p><em>a</em></p>\n"


def test_a_page_renders_no_streaming_answer() -> None:
    message = Message(pk=1, role="assistant", content="- a\n- [ ] b\n" * 1000)
    assert partial_answer(message) == PartialAnswer("", 0, message.content)


# --- A real server stays responsive ---------------------------------------------------------------

PASSWORD = "render-deadline-password"
FAST_ECHO = "emulator/echo?tokens_per_second=0&ttft_ms=0"


@pytest.fixture(scope="module")
def render_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    """Daphne on the built-in emulator, with a render deadline of 2 s."""
    directory = tmp_path_factory.mktemp("render-server")
    database = directory / "db.sqlite3"
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "CHAT_"))}
    inherited.pop("REDIS_URL", None)
    env = {
        **inherited,
        "DJANGO_SETTINGS_MODULE": "chatapp.settings",
        "DATABASE_URL": f"sqlite:///{database}",
        "DJANGO_SECRET_KEY": "render-tests-only",
        "CHAT_TITLES": "0",  # no title generations in the ledgers the tests read
        "DJANGO_DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "CHAT_RENDER_DEADLINE": "2",
        "CHAT_LOG_LEVEL": "DEBUG",
        "PYTHONUNBUFFERED": "1",
    }
    prepare_database(env, "writer", PASSWORD)
    process = start_server("render", env, directory)
    try:
        process.wait_ready()
        yield process, database
    finally:
        process.stop()


def _query(database: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    with sqlite3.connect(database, timeout=10) as db:
        return db.execute(sql, args).fetchall()


def _status(database: Path, conversation: int) -> str:
    rows = _query(
        database, "SELECT status FROM chatapp_generation WHERE conversation_id = ?", conversation
    )
    return str(rows[0][0]) if rows else ""


async def _login_page(server: Server) -> int:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as anonymous:
        return (await anonymous.get("/accounts/login/")).status_code


async def test_an_anonymous_request_is_answered_while_an_answer_renders(
    render_server: tuple[Server, Path],
) -> None:
    server, database = render_server
    user = User(sign_in(server, "writer", PASSWORD), database_url="")
    start = len(server.log_text())
    conversation = await user.new_conversation(server, SLOW_MARKDOWN, FAST_ECHO)

    def settling() -> bool:  # the stream is over: its one long line settles now, in the pool
        return "Render job settle started" in server.log_text()[start:]

    await eventually(settling, what="the answer's last blocks to start rendering", within=60)
    assert await _login_page(server) == 200
    # Answered while the render still ran: the answer is written only once it is over.
    assert _status(database, conversation) == "streaming"
    await eventually(
        lambda: _status(database, conversation) == "completed", what="the answer", within=60
    )


async def test_an_anonymous_request_is_answered_while_a_page_view_renders(
    render_server: tuple[Server, Path],
) -> None:
    server, database = render_server
    user = User(sign_in(server, "writer", PASSWORD), database_url="")
    conversation = await user.new_conversation(server, SLOW_MARKDOWN, FAST_ECHO)
    await eventually(
        lambda: _status(database, conversation) == "completed", what="the answer", within=60
    )
    _query(  # as a row from before stored renders: the next view renders it
        database,
        "UPDATE chatapp_message SET html = '', html_key = '', content = ? "
        "WHERE conversation_id = ? AND role = 'assistant'",
        SLOWER_MARKDOWN,
        conversation,
    )
    start = len(server.log_text())
    page = (await user.get(server, f"/c/{conversation}/")).text
    assert PLAIN_TEXT_NOTES["pending"] in page  # the page did not wait for the render
    await eventually(
        lambda: "Render job render started" in server.log_text()[start:],
        what="the answer's render to start",
        within=30,
    )
    assert await _login_page(server) == 200

    def stored() -> str:
        sql = "SELECT html FROM chatapp_message WHERE conversation_id = ? AND role = 'assistant'"
        return str(_query(database, sql, conversation)[0][0])

    assert stored() == ""  # answered while the render still ran
    await eventually(stored, what="the render to be kept", within=60)
    assert PLAIN_TEXT_NOTES["deadline"] in stored()  # kept: the next view renders nothing
    page = (await user.get(server, f"/c/{conversation}/")).text
    assert PLAIN_TEXT_NOTES["deadline"] in page
