"""A real MCP server for the tests, written with the SDK's server side (FastMCP), served over
Streamable HTTP at /mcp (and the older SSE transport at /sse-transport/sse) on loopback by
uvicorn:

    python tests/mcp_server/server.py --port 8765

Its tools are the cases the app must survive: `lookup` answers, `slow` takes its time and
reports progress, `fail` fails, `picture` returns a PNG, `document` a CSV file and a resource
link, `huge` returns 2 MB of text, `grow` adds a tool and says the list changed, `shaped` takes
a word whose schema's `pattern` backtracks catastrophically under Python's `re`. `slow` writes a
line to stdout when it starts and when it is cancelled (`notifications/cancelled`), so a test can
see the cancellation reach the server. `/garbage` answers a web page and `/broken` HTTP 500:
servers that are not what they claim.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
from typing import Annotated

import uvicorn
from mcp import types
from mcp.server.fastmcp import Context, FastMCP, Image
from pydantic import Field
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route

# A 1x1 red PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)

server = FastMCP("chatapp-test-tools")


@server.tool()
def lookup(word: str) -> str:
    """Look a word up in the test dictionary. <b>Descriptions are shown escaped.</b>"""
    return f"The word {word!r} means: a thing the test server knows (lookup-result-42)."


@server.tool()
async def slow(seconds: float, ctx: Context) -> str:  # type: ignore[type-arg]
    """Wait `seconds`, reporting progress each half second."""
    print("slow: started", flush=True)
    steps = max(1, int(seconds * 2))
    try:
        for step in range(steps):
            await ctx.report_progress(step, steps, f"step {step + 1} of {steps}")
            await asyncio.sleep(seconds / steps)
    except asyncio.CancelledError:
        print("slow: cancelled", flush=True)
        raise
    return f"Waited {seconds:g} s."


@server.tool()
def fail(reason: str) -> str:
    """Always fails, with `reason`."""
    raise ValueError(f"the test tool failed on purpose: {reason}")


@server.tool()
def picture() -> Image:
    """A one-pixel red PNG."""
    return Image(data=PNG, format="png")


@server.tool()
def document() -> list[types.ContentBlock]:
    """A CSV file as an embedded resource, and a link to another resource."""
    csv = base64.b64encode(b"name,score\nada,3\n").decode()
    blob = types.BlobResourceContents(
        uri="file:///reports/scores.csv", mimeType="text/csv", blob=csv
    )
    link = types.ResourceLink(type="resource_link", name="notes", uri="https://example.org/notes")
    return [types.EmbeddedResource(type="resource", resource=blob), link]


@server.tool()
def huge() -> str:
    """Two megabytes of text."""
    return "0123456789abcdef" * (2 * 1024 * 1024 // 16)


@server.tool()
def shaped(word: Annotated[str, Field(pattern=r"^(a+)+$")]) -> str:
    """Takes a word of a's only; its pattern, run by a backtracking engine on 29 characters that
    do not match, takes a minute (pydantic-core's own engine checks it here in linear time)."""
    return f"{len(word)} a's."


@server.tool()
async def grow(ctx: Context) -> str:  # type: ignore[type-arg]
    """Adds the tool `grown`, and tells the client the list changed."""

    def grown() -> str:
        """A tool that appeared later."""
        return "grown"

    server.add_tool(grown, name="grown")
    await ctx.session.send_tool_list_changed()
    return "Added the tool grown."


async def garbage(request: Request) -> Response:
    """Not an MCP server: a web page, with 200 OK."""
    return HTMLResponse("<html><body>Welcome to my homepage</body></html>")


async def broken(request: Request) -> Response:
    """An MCP endpoint that fails."""
    return PlainTextResponse("internal error", status_code=500)


def app() -> Starlette:
    server.settings.streamable_http_path = "/mcp"
    streamable = server.streamable_http_app()
    sse = server.sse_app()
    anything = ["GET", "POST", "DELETE"]
    return Starlette(
        routes=[
            Route("/garbage", garbage, methods=anything),
            Route("/broken", broken, methods=anything),
            Mount("/sse-transport", app=sse),
            Mount("/", app=streamable),
        ],
        lifespan=lambda _app: server.session_manager.run(),
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    print(f"MCP test server on port {args.port}", file=sys.stderr, flush=True)
    uvicorn.run(app(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
