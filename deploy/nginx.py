"""nginx in front of the loopback cluster: its configuration, and the process.

The configuration is the production one (`nginx/proxy.conf`, included as is) in a loopback
`server` without TLS, with every path inside the cluster's directory, so nginx runs without
root and touches nothing of the system's own nginx. The access log names the upstream that
served each request (`upstream=127.0.0.1:PORT`, or `-` for a static file nginx served itself),
which is how one tells that both processes take requests.

Static files are served as the app serves them (`chatapp/static_files.py`): a hashed name is
kept a year unasked, another a minute; the `.gz` (and, with Debian's brotli module installed,
the `.br`) that collectstatic wrote beside each is sent to a browser that accepts it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from .processes import ServiceError, stop, tail, wait_for_port

__all__ = ["nginx_binary", "nginx_config", "nginx_server"]

PROXY_CONF = Path(__file__).resolve().parent / "nginx" / "proxy.conf"
MIME_TYPES = Path("/etc/nginx/mime.types")
# libnginx-mod-http-brotli-static; without it, gzip only.
BROTLI_STATIC = Path("/usr/lib/nginx/modules/ngx_http_brotli_static_module.so")
# Hashed names, as collectstatic writes them (`chat.4e1a3fce968e.js`), and the others.
STATIC_CACHE = """\
    map $uri $static_cache_control {
        "~\\.[0-9a-f]{12}\\.[^./]+$" "max-age=31536000, public, immutable";
        default "max-age=60, public";
    }"""


def nginx_binary() -> str:
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if found is None:
        raise ServiceError("nginx is not installed: run `make test-packages` (Debian).")
    return found


def nginx_config(directory: Path, port: int, upstreams: Sequence[int], static_root: Path) -> str:
    servers = "\n".join(f"        server 127.0.0.1:{upstream};" for upstream in upstreams)
    temp = directory / "nginx-temp"
    mime = f"include {MIME_TYPES};" if MIME_TYPES.exists() else "types { text/css css; }"
    brotli = BROTLI_STATIC.exists()
    # Each open tab holds a websocket and a keep-alive connection, each with its upstream twin: at
    # 512 connections nginx dropped page loads of a 400-tab crowd (`benchmarks load
    # --processes 2 --concurrency 400` could not start).
    return f"""\
{f"load_module {BROTLI_STATIC};" if brotli else ""}
daemon off;
{_worker_user()}
worker_processes 1;
pid {directory}/nginx.pid;
error_log {directory}/nginx-error.log warn;
worker_rlimit_nofile 8192;
events {{ worker_connections 4096; }}
http {{
    {mime}
    default_type application/octet-stream;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    log_format cluster '$remote_addr "$request" $status $body_bytes_sent '
                       'upstream=$upstream_addr time=$request_time';
    access_log {directory}/nginx-access.log cluster;
    client_max_body_size 3m;  # the app's limits (chatapp/access/body_limits.py)
    map $cookie_sessionid $chat_affinity {{
        ""      $request_id;
        default $cookie_sessionid;
    }}
    upstream gateway_chat {{
        hash $chat_affinity consistent;
{servers}
        keepalive 16;
    }}
    map $http_upgrade $connection_upgrade {{
        default upgrade;
        ""      "";
    }}
{STATIC_CACHE}
    server {{
        listen 127.0.0.1:{port};
        location /static/ {{
            alias {static_root}/;
            gzip_static on;
            gzip_vary on;
            {"brotli_static on;" if brotli else ""}
            add_header Cache-Control $static_cache_control;
            add_header X-Content-Type-Options nosniff;
        }}
        location / {{
            include {PROXY_CONF};
        }}
        location ~ ^/c/(new|[0-9]+)/send/$ {{
            client_max_body_size 8m;
            include {PROXY_CONF};
        }}
        location ~ ^/(accounts|admin)/login/$ {{
            client_max_body_size 64k;
            include {PROXY_CONF};
        }}
        location ~ ^/import/$ {{
            client_max_body_size 21m;
            include {PROXY_CONF};
        }}
        location ~ ^/knowledge/[0-9]+/files/$ {{
            client_max_body_size 21m;
            include {PROXY_CONF};
        }}
    }}
}}
"""


def _worker_user() -> str:
    """As root, nginx's workers drop to `nobody:nobody`, and Debian has no `nobody` group: name
    the user its own nginx runs as (whose group has its name)."""
    if os.geteuid() != 0:
        return ""
    for user in ("www-data", "nginx"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            continue
        return f"user {user};"
    return "user nobody nogroup;"


@contextmanager
def nginx_server(
    directory: Path, port: int, upstreams: Sequence[int], static_root: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """nginx on 127.0.0.1:`port` balancing over the Daphne `upstreams`, until the block ends."""
    binary = nginx_binary()
    config = directory / "nginx.conf"
    config.write_text(nginx_config(directory, port, upstreams, static_root))
    (directory / "nginx-temp").mkdir(exist_ok=True)
    log = directory / "nginx-error.log"
    test = subprocess.run(
        [binary, "-t", "-q", "-p", str(directory), "-e", str(log), "-c", str(config)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if test.returncode != 0:
        raise ServiceError(f"nginx rejected its configuration:\n{test.stderr}")
    process = subprocess.Popen(
        [binary, "-p", str(directory), "-e", str(log), "-c", str(config)],
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # Ctrl-C reaches the cluster, which stops nginx in its turn
    )
    try:
        wait_for_port("nginx", port, process, log=lambda: tail(log))
        yield process
    finally:
        # SIGTERM is nginx's fast shutdown: open websockets are closed, not waited for.
        stop(process)
