"""Single sign-on on a cluster, as `make cluster` runs one: two Daphne processes configured for a
real OpenID Connect provider (tests/oidc/provider.mjs), sharing the session's PostgreSQL and
Redis, behind nginx (`deploy.nginx`, the cluster's own configuration), in real Chromium.

A user signs in on the provider's page; the sign-in starts in process A (the state, nonce and
PKCE verifier go into the session) and the provider's answer is taken by process B, which must
find them: both read sessions from PostgreSQL. The groups of the claim are rows of the database
with the user a member, and the session works on both processes, pages and websockets alike. A
group's policy, set in the database, limits the picker and refuses a send naming another model,
in words, on either process; a group's budget counts a cost settled on A when B checks the next
send. An admin's deactivation, saved by a third process, closes the user's socket on B and sends
their page to the sign-in page; a local account's password change on A ends its other session,
socket and pages, on B too.
"""

from __future__ import annotations

import asyncio
import html
import re
import shutil
import tempfile
from collections.abc import Callable, Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import psycopg
import pytest
from playwright.sync_api import Route, expect

from chatapp.ws.session_sockets import CLOSE_SIGNED_OUT
from deploy.nginx import nginx_server
from deploy.processes import free_port
from tests.oidc import provider as oidc
from tests.static_root import collected_static_root

from .servers import Server, User, add_user, start_server
from .servers import sign_in as sign_in_with_password
from .test_deactivation import close_code, deactivate
from .test_spending_limits import CEILING, PRICE

pytestmark = [pytest.mark.multiprocess, pytest.mark.browser]

LABEL = "Cluster SSO"
PASSWORD = "cluster-sso-password"
FAST = "emulator/chat?tokens_per_second=2000&ttft_ms=5"
ANSWER = "emulator/long?tokens_per_second=2000&long_tokens=300"
# The provider's development sign-in page imports a web font; nothing may leave the machine.
OFFLINE = re.compile(r"^https://fonts\.(googleapis|gstatic)\.com/")


@dataclass(frozen=True)
class SsoCluster:
    a: Server
    b: Server
    url: str
    """nginx's: where the browser goes, as with `make cluster`."""
    provider: oidc.Provider
    env: dict[str, str]
    database_url: str

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def host(self) -> str:
        return self.url.removeprefix("http://")


@pytest.fixture(scope="module")
def sso_cluster(
    servers: tuple[Server, Server],
    cluster_env: dict[str, str],
    cluster_dir: Path,
    postgres_url: str,
) -> Iterator[SsoCluster]:
    """Two servers of their own (the session's have no sign-in provider), on the same database
    and Redis, with nginx in front; the provider knows nginx's callback address."""
    oidc.skip_unless_installed()
    provider_port, proxy_port = free_port(), free_port()
    env = cluster_env | {
        "CHAT_OIDC_ISSUER": f"http://127.0.0.1:{provider_port}",
        "CHAT_OIDC_CLIENT_ID": oidc.CLIENT_ID,
        "CHAT_OIDC_CLIENT_SECRET": oidc.CLIENT_SECRET,
        "CHAT_OIDC_LABEL": LABEL,
        "CHAT_OIDC_SCOPES": "openid email profile groups",
        "CHAT_TRUSTED_PROXIES": "1",  # nginx, as deploy/cluster.py sets it
    }
    # nginx's workers (as root: www-data) write their temp files here, outside pytest's private
    # directories (the servers' and the provider's logs stay in `cluster_dir`).
    directory = Path(tempfile.mkdtemp(prefix="gateway-chat-sso-cluster-"))
    directory.chmod(0o755)
    a = start_server("sso-A", env, cluster_dir)
    b = start_server("sso-B", env, cluster_dir)
    try:
        a.wait_ready()
        b.wait_ready()
        url = f"http://127.0.0.1:{proxy_port}"
        with (
            oidc.running(provider_port, f"{url}/oidc/callback/", cluster_dir / "oidc.log") as idp,
            nginx_server(directory, proxy_port, [a.port, b.port], collected_static_root()),
        ):
            yield SsoCluster(a, b, url, idp, env, postgres_url)
    finally:
        a.stop()
        b.stop()
        shutil.rmtree(directory, ignore_errors=True)


def run[T](coroutine: Coroutine[Any, Any, T]) -> T:
    """An async step (websockets, the servers' helpers) on a thread of its own: Playwright's
    sync API holds this thread's event loop."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def through(server: Server, cluster: SsoCluster) -> Callable[[Route], None]:
    """A route handler sending the request to `server` itself instead of through nginx, with
    the Host the browser sent (the callback address the app builds is nginx's)."""

    def handle(route: Route) -> None:
        request = route.request
        response = route.fetch(
            url=request.url.replace(cluster.url, server.url, 1),
            headers={**request.headers, "host": cluster.host},
            max_redirects=0,
        )
        route.fulfill(response=response)

    return handle


def back_through_a_page(cluster: SsoCluster, sent: list[str]) -> Callable[[Route], None]:
    """A route handler for the provider's consent form: its answer is a chain of redirects
    ending at the callback, and a redirect's next request is never routed (Playwright routes
    the first request of a chain alone). The chain is followed here (with the context's
    cookies) and the browser gets a page that goes to the callback, a navigation of its own,
    which `through` can send to one process. `sent`: the callback addresses it sent the
    browser to."""

    def handle(route: Route) -> None:
        request = route.request
        if request.method != "POST" or "prompt=consent" not in (request.post_data or ""):
            route.fallback()
            return
        response = route.fetch(max_redirects=0)
        location = urljoin(request.url, response.headers["location"])
        for _ in range(5):
            if location.startswith(f"{cluster.url}/oidc/callback/"):
                break
            response = route.request.frame.page.context.request.get(location, max_redirects=0)
            location = urljoin(location, response.headers["location"])
        else:
            raise AssertionError(f"the provider's redirects did not reach the app: {location}")
        sent.append(location)
        refresh = f'<meta http-equiv="refresh" content="0;url={html.escape(location)}">'
        route.fulfill(status=200, content_type="text/html", body=refresh)

    return handle


def sign_in(
    browser: Any,
    cluster: SsoCluster,
    login: str,
    groups: list[str],
    routes: Sequence[tuple[re.Pattern[str], Callable[[Route], None]]] = (),
) -> Any:
    """A new browser through the provider's form as `login` (the provider claiming `groups`):
    the page, in the chat. `routes`: URL patterns and their handlers, set first."""
    cluster.provider.set(mode=None, users={login: {"name": login.title(), "groups": groups}})
    context = browser.new_context()
    context.route(OFFLINE, lambda route: route.abort())
    for pattern, handler in routes:
        context.route(pattern, handler)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{cluster.url}/accounts/login/")
    page.get_by_role("link", name=f"Sign in with {LABEL}").click()
    page.locator('input[name="login"]').fill(login)
    page.locator('input[name="password"]').fill("any password")
    page.get_by_role("button", name="Sign-in").click()
    page.get_by_role("button", name="Continue").click()  # the provider's consent
    expect(page).to_have_url(f"{cluster.url}/")
    expect(page.locator(".logout")).to_contain_text(login)
    return page


def user_of(page: Any, cluster: SsoCluster) -> User:
    """The page's session, for requests straight to one process."""
    cookies = {cookie["name"]: cookie["value"] for cookie in page.context.cookies()}
    return User(cookies, cluster.database_url)


def membership(database_url: str, username: str) -> tuple[int, list[tuple[int, str]]]:
    """The user's id and their groups (id, name), as PostgreSQL has them."""
    with psycopg.connect(database_url, autocommit=True) as db:
        found = db.execute("SELECT id FROM auth_user WHERE username = %s", [username]).fetchone()
        assert found is not None, f"no user {username}"
        groups = db.execute(
            "SELECT g.id, g.name FROM auth_group g JOIN auth_user_groups m ON m.group_id = g.id"
            " WHERE m.user_id = %s ORDER BY g.name",
            [found[0]],
        ).fetchall()
    return int(found[0]), [(int(pk), name) for pk, name in groups]


def offered(page_html: str) -> list[str]:
    """The models of the picker (`#model`'s options, without their gateway's prefix)."""
    picker = re.search(r'<select[^>]*id="model".*?</select>', page_html, re.S)
    assert picker is not None, page_html[:500]
    return sorted(re.sub(r"^g\d+:", "", v) for v in re.findall(r'value="([^"]+)"', picker[0]))


async def watched_on(user: User, server: Server, conversation_pk: int) -> bool:
    async with user.socket(server, conversation_pk):
        return True  # `socket` waited for the server's `watching`


def test_a_sign_in_started_on_a_and_finished_on_b_works_on_both(
    browser: Any, sso_cluster: SsoCluster
) -> None:
    cluster = sso_cluster
    # Only what these servers log from here: other tests' sign-ins went through nginx to either.
    before = {server.name: len(server.log_text()) for server in (cluster.a, cluster.b)}
    callbacks: list[str] = []
    page = sign_in(
        browser,
        cluster,
        "sso-ivy",
        ["Cluster Research", "Cluster Ops"],
        [
            (re.compile(r"/oidc/authenticate/"), through(cluster.a, cluster)),
            (
                re.compile(re.escape(f"{cluster.provider.issuer}/interaction/")),
                back_through_a_page(cluster, callbacks),
            ),
            (re.compile(r"/oidc/callback/"), through(cluster.b, cluster)),
        ],
    )
    try:
        assert len(callbacks) == 1
        a_log, b_log = (
            server.log_text()[before[server.name] :] for server in (cluster.a, cluster.b)
        )
        assert "/oidc/authenticate/" in a_log
        assert "/oidc/authenticate/" not in b_log
        assert "/oidc/callback/" in b_log
        assert "/oidc/callback/" not in a_log
        _, groups = membership(cluster.database_url, "sso-ivy")
        assert [name for _, name in groups] == ["Cluster Ops", "Cluster Research"]

        ivy = user_of(page, cluster)
        for server in (cluster.a, cluster.b):
            response = run(ivy.get(server, "/"))
            assert response.status_code == 200, response.headers
            assert "sso-ivy" in response.text
        conversation_pk = run(ivy.new_conversation(cluster.a, "Hello there", FAST))
        assert run(watched_on(ivy, cluster.b, conversation_pk))
    finally:
        page.context.close()


def test_a_groups_policy_limits_the_picker_and_a_send_on_both_processes(
    browser: Any, sso_cluster: SsoCluster
) -> None:
    cluster = sso_cluster
    page = sign_in(browser, cluster, "sso-jade", ["Cluster Models"])
    try:
        _, [(group_pk, _)] = membership(cluster.database_url, "sso-jade")
        with psycopg.connect(cluster.database_url, autocommit=True) as db:
            db.execute(
                "INSERT INTO chatapp_grouppolicy (group_id, model_patterns, tool_patterns,"
                " updated_at) VALUES (%s, 'emulator/long', '*', now())",
                [group_pk],
            )
            # Saved outside the app, so no signal says so: a write made that way must give the
            # shared facts a new version itself (`chatapp/shared_cache.py`), or each process
            # keeps the policy it had.
            db.execute("UPDATE chatapp_sharedversion SET token = md5(random()::text)")
        page.reload()
        in_browser = page.locator("#model option").evaluate_all(
            "options => options.map(o => o.value.replace(/^g\\d+:/, ''))"
        )
        assert in_browser == ["emulator/long"]
        jade = user_of(page, cluster)
        for server in (cluster.a, cluster.b):
            assert offered(run(jade.get(server, "/")).text) == ["emulator/long"]
            refused = run(jade.post(server, "/c/new/send/", {"content": "Hi", "model": FAST}))
            assert refused.status_code != 302
            assert (
                f"Your group (Cluster Models) may not use {FAST!r} on Default gateway: "
                "choose another model." in html.unescape(refused.text)
            ), refused.text[:1000]
    finally:
        page.context.close()


def test_a_groups_budget_counts_a_cost_settled_on_a_when_b_checks(
    browser: Any, sso_cluster: SsoCluster
) -> None:
    """The first answer (on A, no limit yet) settles its cost; the group's limit is then set
    to one worst case and half that cost: with nothing spent the next send would fit whole, and
    B cuts it to what the cost A settled left."""
    cluster = sso_cluster
    page = sign_in(browser, cluster, "sso-kim", ["Cluster Budget"])
    try:
        kim = user_of(page, cluster)
        _, [(group_pk, _)] = membership(cluster.database_url, "sso-kim")
        with psycopg.connect(cluster.database_url, autocommit=True) as db:
            gateway = db.execute(
                "SELECT id FROM chatapp_gateway WHERE name = 'Default gateway'"
            ).fetchone()
            assert gateway is not None
            db.execute(  # the worst case's price (the settled cost is the gateway's word)
                "INSERT INTO chatapp_modelprice (gateway_id, model, prompt, completion, source,"
                " updated_at) VALUES (%s, 'emulator/long', %s, %s, 'admin', now())"
                " ON CONFLICT (gateway_id, model) DO UPDATE SET prompt = EXCLUDED.prompt,"
                " completion = EXCLUDED.completion, source = 'admin'",
                [gateway[0], PRICE, PRICE],
            )
        conversation_pk = run(kim.new_conversation(cluster.a, "Go", ANSWER))
        generation_pk = run(kim.latest_generation(conversation_pk))
        row = run(
            kim.wait_generation(generation_pk, within=30, until=lambda r: r["cost"] is not None)
        )
        assert row["status"] == "completed"
        cost = Decimal(row["cost"])
        assert cost > 0
        amount = Decimal(str(CEILING)) + cost / 2
        with psycopg.connect(cluster.database_url, autocommit=True) as db:
            db.execute(
                "INSERT INTO chatapp_spendinglimit (group_id, unit, period, amount,"
                " unknown_price, updated_at) VALUES (%s, 'usd', 'month', %s, 'refuse', now())",
                [group_pk, amount],
            )

        sent = run(kim.post(cluster.b, "/c/new/send/", {"content": "Go", "model": ANSWER}))
        # Cut to what is left (#45: a send the limit cannot pay in full is cut, not refused):
        # its worst case fits in what A's settled cost left, which a B that did not count it
        # would have let be the whole worst case.
        assert sent.status_code == 302, sent.text[:1000]
        with psycopg.connect(cluster.database_url, autocommit=True) as db:
            found = db.execute(
                "SELECT g.id, g.spend_ceiling FROM chatapp_generation g JOIN auth_user u"
                " ON u.id = g.user_id WHERE u.username = 'sso-kim' ORDER BY g.id DESC LIMIT 1"
            ).fetchone()
        assert found is not None
        cut_pk, ceiling = found
        assert cut_pk != generation_pk
        assert Decimal(0) < ceiling <= amount - cost < Decimal(str(CEILING))
        run(kim.post(cluster.b, f"/g/{cut_pk}/stop/"))
    finally:
        page.context.close()


def test_a_deactivation_saved_elsewhere_closes_the_socket_on_b_and_ends_the_page(
    browser: Any, sso_cluster: SsoCluster
) -> None:
    cluster = sso_cluster
    page = sign_in(browser, cluster, "sso-lee", ["Cluster Research"])
    try:
        lee = user_of(page, cluster)
        conversation_pk = run(lee.new_conversation(cluster.a, "Hello there", FAST))
        run(lee.wait_idle(conversation_pk))
        page.goto(f"{cluster.url}/c/{conversation_pk}/")

        async def deactivated_on_b() -> int | None:
            async with lee.socket(cluster.b, conversation_pk) as socket:
                # A third process saves it, as an admin's save in any process would.
                await asyncio.to_thread(deactivate, cluster.env, "sso-lee")
                return await close_code(socket, within=15)

        assert run(deactivated_on_b()) == CLOSE_SIGNED_OUT
        page.wait_for_url(re.compile(r"/accounts/login/\?next="))  # its own socket closed
        page.goto(f"{cluster.url}/")
        expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
        for server in (cluster.a, cluster.b):
            response = run(lee.get(server, "/"))
            assert response.status_code == 302
            assert response.headers["location"].startswith("/accounts/login/")
    finally:
        page.context.close()


def test_a_password_change_on_a_ends_the_other_sessions_on_both_processes(
    sso_cluster: SsoCluster,
) -> None:
    """A local account beside the provider's (password sign-in stays on): signed in twice
    through nginx, it changes its password in one session through A; the other session's socket
    on B closes and its requests go to the sign-in page on both processes, while the session
    that changed it goes on."""
    cluster = sso_cluster
    add_user(cluster.database_url, "lin", PASSWORD)
    changing, other = (
        User(sign_in_with_password(cluster, "lin", PASSWORD), cluster.database_url)
        for _ in range(2)
    )
    conversation_pk = run(other.new_conversation(cluster.a, "Hello there", FAST))
    run(other.wait_idle(conversation_pk))
    new = "a new cluster password 7"

    async def changed_on_a() -> tuple[dict[str, str], int | None]:
        async with other.socket(cluster.b, conversation_pk) as socket:
            async with changing.http(cluster.a) as http:
                response = await http.post(
                    "/accounts/password/",
                    data={"old_password": PASSWORD, "new_password1": new, "new_password2": new},
                )
            assert response.status_code == 302, response.text[:1000]
            assert response.headers["location"] == "/accounts/password/changed/"
            # Django gives the changing session a new key (and keeps it signed in).
            cookies = changing.cookies | dict(response.cookies.items())
            return cookies, await close_code(socket, within=15)

    cookies, closed_with = run(changed_on_a())
    assert closed_with == CLOSE_SIGNED_OUT
    changed = User(cookies, cluster.database_url)
    for server in (cluster.a, cluster.b):
        assert run(changed.get(server, "/")).status_code == 200
        response = run(other.get(server, "/"))
        assert response.status_code == 302
        assert response.headers["location"].startswith("/accounts/login/")
    assert sign_in_with_password(cluster, "lin", new)  # the new password, through nginx
