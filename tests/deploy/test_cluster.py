"""`make cluster` for real: PostgreSQL, Redis, Chroma, an emulator, two Daphne processes, nginx.

Everything goes through nginx, as a browser's requests would: the sign-in, a chat answer
streamed over a websocket (upgraded through the proxy), static files. nginx's access log names
the upstream of each request, which shows that both processes take requests and that nginx
served the static files itself. SIGINT to the orchestrator must leave no process behind.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import psycopg
import pytest
from redis import Redis

from deploy.cluster import pid_alive
from deploy.nginx import BROTLI_STATIC
from deploy.processes import free_port, port_open
from tests.multiprocess.servers import ROOT, User, sign_in
from tests.waiting import poll

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]

USERNAME, PASSWORD = "dana", "cluster-test-password"
FAST = "emulator/chat?tokens_per_second=2000&ttft_ms=5"
SHORT = "emulator/long?tokens_per_second=400&long_tokens=200"
# collectstatic hashes and compresses every static file (brotli at its best): seconds of CPU,
# more on two busy cores. A bound, not a wait: the fixture goes on as soon as the cluster is up.
START_WITHIN = 120.0
ADDRESS_LIMIT = 5  # failed sign-ins per address (each costs a password hash: keep it short)


@dataclass(frozen=True)
class Proxy:
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Running:
    process: subprocess.Popen[bytes]
    output: Path
    proxy: Proxy
    state: dict[str, Any]
    started_in: float

    def access_log(self) -> str:
        return (Path(self.state["directory"]) / "nginx-access.log").read_text()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    output = tmp_path_factory.mktemp("cluster") / "output.log"
    port = free_port()
    # MALLOC_ too: the caller's would win over the cluster's own.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "PYTEST_", "MALLOC_"))}
    env |= {"DJANGO_SUPERUSER_USERNAME": USERNAME, "DJANGO_SUPERUSER_PASSWORD": PASSWORD}
    env["CHAT_LOGIN_FAILURES_PER_ADDRESS"] = str(ADDRESS_LIMIT)
    # The pacing is picked per request (`SHORT`): the emulator and the app let it.
    env |= {"GATEWAY_EMULATOR_REQUEST_OPTIONS": "1", "CHAT_EMULATOR_REQUEST_OPTIONS": "1"}
    started = time.monotonic()
    with output.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "deploy.cluster", "--port", str(port)],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:

        def ready() -> re.Match[str] | None:
            text = output.read_text(errors="replace")
            assert process.poll() is None, f"the cluster exited:\n{text}"
            return re.search(r"state: (\S+/cluster\.json)", text)

        state_file = poll(ready, what="the cluster to be ready", within=START_WITHIN)[1]
        state = orjson.loads(Path(state_file).read_bytes())
        yield Running(process, output, Proxy(port), state, time.monotonic() - started)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(30)


def test_prints_the_url_and_the_admin_login(cluster: Running) -> None:
    text = cluster.output.read_text()
    print(f"cluster ready in {cluster.started_in:.1f} s")
    assert f"{cluster.proxy.url}/" in text
    assert f"Created admin account {USERNAME!r}." in text


async def test_streams_an_answer_over_a_websocket_through_nginx(cluster: Running) -> None:
    user = User(sign_in(cluster.proxy, USERNAME, PASSWORD), cluster.state["database_url"])
    conversation_pk = await user.new_conversation(cluster.proxy, "Hello there", FAST)
    await user.wait_idle(conversation_pk)
    async with user.socket(cluster.proxy, conversation_pk) as socket:
        generation_pk = await user.send(cluster.proxy, conversation_pk, "Tell me of otters", SHORT)
        stream = await socket.follow(generation_pk, within=20)
    row = await user.generation(generation_pk)
    assert row["status"] == "completed"
    assert stream.done is not None
    assert stream.done["status"] == "completed"
    assert stream.gaps == []
    assert len(stream.deltas) >= 3
    assert stream.content == row["content"]
    assert len(row["content"]) > 200
    assert re.search(
        r'"GET /ws/chat/ HTTP/1.1" 101 .* upstream=127\.0\.0\.1:\d+', cluster.access_log()
    )


def test_requests_reach_both_daphne_processes(cluster: Running) -> None:
    with httpx.Client(base_url=cluster.proxy.url, timeout=10) as http:
        for _ in range(4):
            assert http.get("/accounts/login/").status_code == 200
    served_by = {
        int(port) for port in re.findall(r"upstream=127\.0\.0\.1:(\d+)", cluster.access_log())
    }
    assert served_by == set(cluster.state["daphne_ports"])


def test_daphne_processes_run_with_two_malloc_arenas(cluster: Running) -> None:
    daphnes = {
        name: pid for name, pid in cluster.state["pids"].items() if name.startswith("daphne")
    }
    assert len(daphnes) == 2
    for pid in daphnes.values():
        entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert b"MALLOC_ARENA_MAX=2" in entries
    emulator = Path(f"/proc/{cluster.state['pids']['emulator']}/environ").read_bytes()
    assert b"MALLOC_ARENA_MAX" not in emulator  # Daphne's setting, not the whole environment's


def test_every_process_keeps_knowledge_vectors_in_the_clusters_chroma(cluster: Running) -> None:
    chroma_url = cluster.state["chroma_url"]
    assert httpx.get(f"{chroma_url}/api/v2/heartbeat", timeout=10).status_code == 200
    for name, pid in cluster.state["pids"].items():
        if name.startswith("daphne"):
            entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            assert f"CHAT_CHROMA_URL={chroma_url}".encode() in entries


def test_the_clusters_task_worker_indexes_a_file_into_chroma(cluster: Running) -> None:
    """A file added as a page adds it (with its task, in PostgreSQL) is read and embedded by
    the cluster's worker process, its vectors in the cluster's Chroma."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "PYTEST_"))}
    env |= {
        "DATABASE_URL": cluster.state["database_url"],
        "CHAT_CHROMA_URL": cluster.state["chroma_url"],
        "PYTHONPATH": str(ROOT),
    }
    script = (
        "from django.contrib.auth import get_user_model\n"
        "from chatapp.knowledge.files import add_file\n"
        "from chatapp.knowledge.models import Collection\n"
        f"user = get_user_model().objects.get(username={USERNAME!r})\n"
        "row = Collection.objects.create(owner=user, name='Handbook')\n"
        "print(add_file(row, 'rules.md', b'# Leave\\n\\nThirty days.', user.pk).pk)\n"
    )
    added = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "shell", "--no-imports", "-v0", "-c", script],
        env=env, cwd=ROOT, check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    file_pk = int(added.stdout.strip())

    def state() -> tuple[str, str] | None:
        with psycopg.connect(cluster.state["database_url"], autocommit=True) as db:
            row = db.execute(
                "SELECT state, error FROM chatapp_knowledgefile WHERE id = %s", [file_pk]
            ).fetchone()
        assert row is not None
        return (row[0], row[1]) if row[0] in {"ready", "failed"} else None

    assert poll(state, what="the file indexed", within=60) == ("ready", "")
    assert "worker" in cluster.state["pids"]


def test_nginx_serves_the_collected_static_files_itself(cluster: Running) -> None:
    static_root = Path(cluster.state["directory"]) / "static"
    response = httpx.get(f"{cluster.proxy.url}/static/chatapp/chat.js", timeout=10)
    assert response.status_code == 200
    assert response.content == (static_root / "chatapp" / "chat.js").read_bytes()
    assert response.headers["server"].startswith("nginx")
    assert response.headers["cache-control"] == "max-age=60, public"  # no hash in the name
    # No upstream: nginx answered from the collected files.
    static_line = r'"GET /static/chatapp/chat.js HTTP/1.1" 200 \d+ upstream=- '
    assert re.search(static_line, cluster.access_log())


@pytest.mark.parametrize(
    ("accept", "encoding"),
    [
        ("gzip, deflate, br", "br" if BROTLI_STATIC.exists() else "gzip"),
        ("gzip", "gzip"),
        ("identity", None),
    ],
)
def test_nginx_sends_a_hashed_name_for_a_year_precompressed_as_asked(
    cluster: Running, accept: str, encoding: str | None
) -> None:
    static_root = Path(cluster.state["directory"]) / "static"
    name = orjson.loads((static_root / "staticfiles.json").read_bytes())["paths"]["chatapp/chat.js"]
    response = httpx.get(
        f"{cluster.proxy.url}/static/{name}", headers={"Accept-Encoding": accept}, timeout=10
    )
    assert response.status_code == 200
    assert response.headers["cache-control"] == "max-age=31536000, public, immutable"
    assert response.headers["vary"] == "Accept-Encoding"
    assert response.headers.get("content-encoding") == encoding
    assert response.content == (static_root / name).read_bytes()  # as httpx decoded it


def test_a_forged_forwarded_for_is_one_address_through_nginx(cluster: Running) -> None:
    """nginx writes X-Forwarded-For from its peer and the app trusts that one proxy: a client
    that forges a new header on every request is still one address to the sign-in limit, in
    both processes (the counts are in Redis). Its counts are deleted after."""
    limit = ADDRESS_LIMIT
    try:
        with httpx.Client(base_url=cluster.proxy.url, timeout=10) as http:

            def attempt(username: str, password: str, index: int) -> str:
                page = http.get("/accounts/login/")
                token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
                assert token is not None
                form = {"username": username, "password": password, "csrfmiddlewaretoken": token[1]}
                forged = {"X-Forwarded-For": f"198.51.100.{index}"}
                return http.post("/accounts/login/", data=form, headers=forged).text

            for index in range(limit):
                assert "didn't match" in attempt(f"nobody{index}", "wrong", index)
            assert "Too many attempts" in attempt(USERNAME, PASSWORD, limit)
    finally:
        redis = Redis.from_url(cluster.state["redis_url"])
        for key in redis.scan_iter("*login-failures*"):
            redis.delete(key)
        redis.close()


def _process_tree(roots: set[int]) -> dict[int, str]:
    """Every living process under `roots` (and the roots), by PID, with its name."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            head, _, rest = stat.read_text().rpartition(")")
        except OSError:
            continue
        pid = int(stat.parent.name)
        parents[pid], names[pid] = int(rest.split()[1]), head.split("(", 1)[1]
    tree = {pid for pid in roots if pid in names}
    while grown := {pid for pid, parent in parents.items() if parent in tree} - tree:
        tree |= grown
    return {pid: names[pid] for pid in tree}


def test_sigint_stops_every_process_it_started(cluster: Running) -> None:
    """Last: it stops the cluster. PostgreSQL's postmaster is a root of its own (pg_ctl
    detaches it); everything else descends from the orchestrator."""
    tree = _process_tree({cluster.process.pid, cluster.state["pids"]["postgres"]})
    names = sorted(tree.values())
    assert {"nginx", "redis-server", "postgres", "daphne", "chroma"} <= set(names), names
    assert names.count("daphne") == 2, names
    ports = [cluster.proxy.port, *cluster.state["daphne_ports"]]
    for url in (cluster.state["database_url"], cluster.state["redis_url"]):
        ports.append(int(re.search(r":(\d+)/", url)[1]))  # type: ignore[index]
    ports.append(int(cluster.state["chroma_url"].rsplit(":", 1)[1]))
    assert all(port_open(port) for port in ports)

    cluster.process.send_signal(signal.SIGINT)
    assert cluster.process.wait(20) == 0
    left = {pid: name for pid, name in tree.items() if pid_alive(pid)}
    assert left == {}
    assert not any(port_open(port) for port in ports)
    assert not Path(cluster.state["directory"]).exists()
    assert "Stopped." in cluster.output.read_text()
