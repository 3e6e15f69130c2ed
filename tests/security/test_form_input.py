"""Bad input through the forms, over the real Daphne server: huge messages, control characters,
invalid UTF-8 sent as raw bytes. Each gets a clear answer (the composer's error in words, or the
text kept as sent, or a 400 for a body past Django's limit), and the server keeps serving."""

from __future__ import annotations

import re

import httpx

from chatapp.conversations.turns import MAX_MESSAGE_CHARS
from tests.multiprocess.servers import Server, User

HTMX = {"HX-Request": "true"}


def composer_error(response: httpx.Response) -> str | None:
    if response.headers.get("HX-Retarget") != "#composer-error":
        return None
    return re.sub(r"<[^>]+>", "", response.text).strip()


async def source_of_new_answer(http: httpx.AsyncClient, response: httpx.Response) -> str:
    """The question the new conversation's page shows, as stored (`/m/<pk>/source/`)."""
    assert response.status_code == 302, response.text[:300]
    page = (await http.get(response.headers["location"])).text
    question = re.findall(r'<article class="message user" id="message-(\d+)"', page)[0]
    return (await http.get(f"/m/{question}/source/")).text


async def still_serving(http: httpx.AsyncClient) -> None:
    response = await http.post("/c/new/send/", data={"content": "still there?", "model": "ok"})
    assert await source_of_new_answer(http, response) == "still there?"


async def test_a_message_over_the_limit_gets_the_composers_error(
    server: Server, victim: User
) -> None:
    async with victim.http(server) as http:
        too_long = {"content": "x" * (MAX_MESSAGE_CHARS + 1), "model": "ok"}
        response = await http.post("/c/new/send/", data=too_long, headers=HTMX)
        assert composer_error(response) == (
            f"The message is too long (at most {MAX_MESSAGE_CHARS:,} characters)."
        )
        # The control: at the limit, it is sent (and stored whole).
        at_limit = {"content": "y" * MAX_MESSAGE_CHARS, "model": "ok"}
        response = await http.post("/c/new/send/", data=at_limit)
        assert await source_of_new_answer(http, response) == at_limit["content"]


async def test_a_body_past_djangos_limit_is_a_400_and_the_server_carries_on(
    server: Server, victim: User
) -> None:
    async with victim.http(server) as http:
        huge = {"content": "x" * (3 * 1024 * 1024), "model": "ok"}
        response = await http.post("/c/new/send/", data=huge, headers=HTMX)
        assert response.status_code == 400
        await still_serving(http)


async def test_nul_is_refused_in_words_and_other_controls_are_kept(
    server: Server, victim: User
) -> None:
    async with victim.http(server) as http:
        response = await http.post(
            "/c/new/send/", data={"content": "a\x00b", "model": "ok"}, headers=HTMX
        )
        assert composer_error(response) == (
            "The message contains a NUL character (U+0000); remove it and send again."
        )
        text = "bell\x07 escape\x1b[31m red\x1b[0m tab\there\u202eright-to-left"
        response = await http.post("/c/new/send/", data={"content": text, "model": "ok"})
        assert await source_of_new_answer(http, response) == text


async def test_invalid_utf8_in_a_raw_form_body_is_read_and_kept_as_valid_text(
    server: Server, victim: User
) -> None:
    # Django reads a body that is not UTF-8 as Latin-1, and a percent-escape that is not UTF-8
    # with replacement characters: valid text either way, and an overlong "/" stays no "/".
    cases = {
        b"content=caf\xe9+\xff\xfe+%C3%28&model=ok": "caf\xe9 \xff\xfe \ufffd(",
        b"content=%C0%AF..%C0%AF&model=ok": "\ufffd\ufffd..\ufffd\ufffd",
        b"content=\xc0\xaf..\xc0\xaf&model=ok": "\xc0\xaf..\xc0\xaf",
    }
    async with victim.http(server) as http:
        for body, stored in cases.items():
            response = await http.post(
                "/c/new/send/",
                content=body,
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )
            assert await source_of_new_answer(http, response) == stored, body
        await still_serving(http)


async def test_control_characters_are_dropped_from_titles_and_searches(
    server: Server, victim: User
) -> None:
    async with victim.http(server) as http:
        response = await http.post("/c/new/send/", data={"content": "to rename", "model": "ok"})
        conversation = response.headers["location"]
        response = await http.post(f"{conversation}rename/", data={"title": "new\x00 ti\x1btle\n"})
        assert response.status_code == 302
        page = (await http.get(conversation)).text
        assert "<title>new title" in page
        response = await http.get("/search/", params={"q": "re\x00name"})
        assert response.status_code == 200
        assert "1 conversation matches" in response.text
        assert "<mark>rename</mark>" in response.text
