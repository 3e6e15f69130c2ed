"""A spending limit holds across server processes: 20 new chats sent at once, half through each
Daphne, against a limit with room for 5.5 worst cases start exactly 5 whole and one cut to the
half left (the limit rows are locked while each turn checks, `chatapp/costs/spending_limits.py`),
and the other 14 send nothing upstream.

Without the lock this fails only when the two servers' checks meet at the last slot (6 of 20
started in one such run); `tests/chatapp/costs/test_spending_limits.py` shows the lock itself on
PostgreSQL, a second check waiting for the first to commit, every time."""

from __future__ import annotations

import asyncio
import re

import psycopg
import pytest

from gateway_client.emulator import EmulatorURL

from .servers import Server, User, add_user, sign_in

pytestmark = pytest.mark.multiprocess

# Slow enough that every answer still streams while the 20 are checked: each holds its worst
# case the whole time (a settled cost would free the rest of it).
MODEL = "emulator/long?tokens_per_second=10&long_tokens=400"
PRICE = "0.001"  # per prompt and per completion token
# "Go" is one token; no budget is set, so 4,096 completion tokens are reserved.
CEILING = 0.001 + 4096 * 0.001
USERNAME, PASSWORD = "dana", "limits-across-processes"


def price_and_limit(database_url: str, user_pk: int, amount: float) -> None:
    with psycopg.connect(database_url, autocommit=True) as db:
        found = db.execute(
            "SELECT id FROM chatapp_gateway WHERE name = 'Default gateway'"
        ).fetchone()
        assert found is not None
        db.execute(
            "INSERT INTO chatapp_modelprice (gateway_id, model, prompt, completion, source,"
            " updated_at) VALUES (%s, 'emulator/long', %s, %s, 'admin', now())"
            " ON CONFLICT (gateway_id, model) DO UPDATE SET prompt = EXCLUDED.prompt,"
            " completion = EXCLUDED.completion, source = 'admin'",
            [found[0], PRICE, PRICE],
        )
        db.execute(
            "INSERT INTO chatapp_spendinglimit (user_id, unit, period, amount, unknown_price,"
            " updated_at) VALUES (%s, 'usd', 'month', %s, 'refuse', now())",
            [user_pk, amount],
        )


def assert_five_whole_and_one_cut(ceilings: list[float | None]) -> None:
    """Five answers reserved their worst case and one was cut to the half case left (#45: a send
    the limit cannot pay in full is cut to what is left, not refused); together within it."""
    assert len(ceilings) == 6, ceilings
    known = sorted(ceiling for ceiling in ceilings if ceiling is not None)
    assert known[1:] == pytest.approx([CEILING] * 5)
    assert 0 < known[0] < CEILING
    assert sum(known) <= 5 * CEILING + CEILING / 2


def started_generations(database_url: str, user_pk: int) -> list[tuple[int, float | None]]:
    with psycopg.connect(database_url, autocommit=True) as db:
        rows = db.execute(
            "SELECT id, spend_ceiling FROM chatapp_generation WHERE user_id = %s ORDER BY id",
            [user_pk],
        ).fetchall()
    return [(pk, None if ceiling is None else float(ceiling)) for pk, ceiling in rows]


async def test_twenty_sends_at_once_against_room_for_five_start_five(
    servers: tuple[Server, Server], postgres_url: str, paced_emulator: EmulatorURL
) -> None:
    server_a, server_b = servers
    user_pk = add_user(postgres_url, USERNAME, PASSWORD)
    dana = User(sign_in(server_a, USERNAME, PASSWORD), postgres_url)
    await dana.get(server_a, "/")  # the default gateway's row exists once a page was served
    price_and_limit(postgres_url, user_pk, 5 * CEILING + CEILING / 2)
    before = {record.id for record in paced_emulator.app.records.all()}

    async def send(server: Server) -> tuple[int, str]:
        async with dana.http(server) as http:
            # Each server checks its ten one after another, each check slowed (the overlap).
            data = {"content": "Go", "model": MODEL}
            response = await http.post("/c/new/send/", data=data, timeout=30)
        return response.status_code, response.text

    results = await asyncio.gather(*(send(server_a if i % 2 else server_b) for i in range(20)))
    started = [text for status, text in results if status == 302]
    refused = [text for status, text in results if status != 302]
    assert len(started) == 6, results
    for text in refused:
        assert re.search(
            r"Even a short answer \(64 tokens\) to this conversation would cost about "
            r"\$[0-9.]+, more than the \$[0-9.]+ left of your spending limit of \$22\.5[0-9]* "
            r"a month; it resets on 1 \w+ at 00:00 UTC\.",
            text,
        ), text
    generations = started_generations(postgres_url, user_pk)
    assert_five_whole_and_one_cut([ceiling for _, ceiling in generations])
    new = [record for record in paced_emulator.app.records.all() if record.id not in before]
    assert len([record for record in new if record.scenario == "long"]) == 6  # none refused
    for pk, _ in generations:
        await dana.post(server_a, f"/g/{pk}/stop/")


def group_limit(database_url: str, user_pks: list[int], amount: float) -> None:
    """A group of `user_pks` with a monthly limit of `amount` US dollars, shared by them."""
    with psycopg.connect(database_url, autocommit=True) as db:
        row = db.execute(
            "INSERT INTO auth_group (name) VALUES ('Team Research') RETURNING id"
        ).fetchone()
        assert row is not None
        for user_pk in user_pks:
            db.execute(
                "INSERT INTO auth_user_groups (user_id, group_id) VALUES (%s, %s)",
                [user_pk, row[0]],
            )
        db.execute(
            "INSERT INTO chatapp_spendinglimit (group_id, unit, period, amount, unknown_price,"
            " updated_at) VALUES (%s, 'usd', 'month', %s, 'refuse', now())",
            [row[0], amount],
        )


async def test_two_members_sending_at_once_through_two_servers_share_the_groups_room(
    servers: tuple[Server, Server], postgres_url: str, paced_emulator: EmulatorURL
) -> None:
    """A group's limit is the same lock: 20 new chats of two members at once, split over both
    servers, against the group's room for 5 worst cases start exactly 5."""
    server_a, server_b = servers
    names = ("gale", "hugo")
    pks = [add_user(postgres_url, name, PASSWORD) for name in names]
    members = [User(sign_in(server_a, name, PASSWORD), postgres_url) for name in names]
    await members[0].get(server_a, "/")
    price_and_limit(postgres_url, pks[0], 1000)  # the price; gale's own limit leaves room
    group_limit(postgres_url, pks, 5 * CEILING + CEILING / 2)
    before = {record.id for record in paced_emulator.app.records.all()}

    async def send(index: int) -> tuple[int, str]:
        member, server = members[index % 2], (server_a, server_b)[index // 2 % 2]
        async with member.http(server) as http:
            data = {"content": "Go", "model": MODEL}
            response = await http.post("/c/new/send/", data=data, timeout=30)
        return response.status_code, response.text

    results = await asyncio.gather(*(send(i) for i in range(20)))
    started = [text for status, text in results if status == 302]
    refused = [text for status, text in results if status != 302]
    assert len(started) == 6, results
    for text in refused:
        assert re.search(
            r"Even a short answer \(64 tokens\) to this conversation would cost about "
            r"\$[0-9.]+, more than the \$[0-9.]+ left of the Team Research group(&#x27;|')s "
            r"spending limit of \$22\.5[0-9]* a month",
            text,
        ), text
    generations = [
        (member, pk, ceiling)
        for member, user_pk in zip(members, pks, strict=True)
        for pk, ceiling in started_generations(postgres_url, user_pk)
    ]
    assert_five_whole_and_one_cut([ceiling for _, _, ceiling in generations])
    new = [record for record in paced_emulator.app.records.all() if record.id not in before]
    assert len([record for record in new if record.scenario == "long"]) == 6
    for member, pk, _ in generations:
        await member.post(server_a, f"/g/{pk}/stop/")
