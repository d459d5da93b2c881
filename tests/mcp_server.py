"""A real MCP server for the tests, on the SDK's server side: `python tests/mcp_server.py stdio|http PORT`.

Tools: `echo` (no annotations: needs approval), `lookup` (read-only, structured output),
`picture` (read-only, an image), `broken` (reports an error), `crash` (the process dies
mid-call), `slow` (sleeps, for cancellation and SIGTERM), `leak` (a token in text, structured content,
an embedded resource and a link), `big` (a result of N characters, as text and structured content),
`env_value` (a variable of the server's environment, as its env table gave it), `header_value` (a header of
the HTTP request, as its headers table gave it), `where` (read-only, the directory it runs in). `MCP_TEST_PIDFILE`
gets the server's pid; `MCP_TEST_EXTRA_TOOL=1` adds `extra`, so a test can change the listing between runs;
`MCP_TEST_CLASH=1` adds `a.b` and `a_b`, whose names clean to the same `SERVER__a_b`.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import mcp_types
from mcp.server.mcpserver import Context, Image, MCPServer

READ_ONLY = mcp_types.ToolAnnotations(read_only_hint=True, idempotent_hint=True)
# A 1x1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201a5dc3e5e0000000049454e44ae426082"
)

server = MCPServer("chronicle-test")


@server.tool()
def echo(text: str) -> str:
    """Say TEXT back."""
    return f"echo: {text}"


@server.tool(annotations=READ_ONLY)
def lookup(key: str) -> dict[str, object]:
    """Look KEY up in a small table."""
    return {"key": key, "value": len(key), "found": True}


@server.tool(annotations=READ_ONLY)
def picture() -> Image:
    """A tiny picture."""
    return Image(data=PNG, format="png")


@server.tool()
def broken(reason: str = "no reason") -> str:
    """Always fails."""
    raise ValueError(f"broken on purpose: {reason}")


@server.tool()
def crash() -> str:
    """The server process dies while answering."""
    sys.stdout.flush()
    os._exit(3)


@server.tool()
def slow(seconds: float = 30.0) -> str:
    """Sleeps SECONDS."""
    time.sleep(seconds)
    return "woke up"


#: Bytes whose base64 looks like a random token to the scan: a binary resource keeps it as given.
BLOB = "q8Zr3Lk9Xw2Vb7Nm4Tp6Jd1Hs5Gf0Yc"
#: A token of a well-known shape (a GitHub token), cut by the secret scan wherever it is.
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


@server.tool(annotations=READ_ONLY)
def leak() -> list[object]:
    """A token everywhere a result can hold text."""
    return [
        f"key {TOKEN}",
        mcp_types.EmbeddedResource(
            type="resource", resource=mcp_types.TextResourceContents(uri="file:///key.txt", text=f"key {TOKEN}", mime_type="text/plain")
        ),
        mcp_types.ResourceLink(type="resource_link", uri=f"https://example.com/?token={TOKEN}", name=f"key {TOKEN}"),
        mcp_types.EmbeddedResource(
            type="resource", resource=mcp_types.BlobResourceContents(uri="file:///k.bin", blob=BLOB, mime_type="application/octet-stream")
        ),
    ]


@server.tool(annotations=READ_ONLY)
def big(size: int) -> str:
    """SIZE characters."""
    return ("0123456789" * (size // 10 + 1))[:size]


@server.tool(annotations=READ_ONLY)
def env_value(variable: str) -> str:
    """The server's VARIABLE."""
    return f"{variable} is {os.environ.get(variable)}"


@server.tool(annotations=READ_ONLY)
def header_value(header: str, ctx: Context) -> str:
    """The request's HEADER (over HTTP)."""
    return f"{header} is {(ctx.headers or {}).get(header)}"
@server.tool(annotations=READ_ONLY)
def where() -> str:
    """The directory the server runs in."""
    return os.getcwd()


if os.environ.get("MCP_TEST_EXTRA_TOOL") == "1":

    @server.tool()
    def extra() -> str:
        """A tool that appears later."""
        return "extra"


if os.environ.get("MCP_TEST_CLASH") == "1":

    @server.tool(name="a.b")
    def dotted() -> str:
        """Named with a dot."""
        return "dotted"

    @server.tool(name="a_b")
    def underscored() -> str:
        """Named with an underscore."""
        return "underscored"


if __name__ == "__main__":
    if os.environ.get("MCP_TEST_PIDFILE"):
        Path(os.environ["MCP_TEST_PIDFILE"]).write_text(str(os.getpid()))
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
