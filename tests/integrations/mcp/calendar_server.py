"""A real MCP server for the tests, written with the official SDK: a small calendar.

``python calendar_server.py`` serves over stdio; ``python calendar_server.py --http`` serves
streamable HTTP on a free loopback port and prints the port on its first line. With
``CALENDAR_TOKEN`` set, HTTP requests must carry ``Authorization: Bearer <token>``.
Every booking is appended to the file ``CALENDAR_LEDGER`` names, so tests can count the
calls the server really received.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

from mcp.server.mcpserver import MCPServer

calendar = MCPServer("calendar")


@calendar.tool()
def book_meeting(title: str, day: str) -> str:
    """Book a meeting on the calendar.

    Args:
        title: what the meeting is about.
        day: the day, e.g. "Monday".
    """
    ledger = os.environ.get("CALENDAR_LEDGER")
    if ledger:
        with open(ledger, "a", encoding="utf-8") as file:
            file.write(f"{title}|{day}\n")
    return f"Booked '{title}' on {day}."


@calendar.tool()
def free_days() -> list[str]:
    """The days that still have room."""
    return ["Tuesday", "Thursday"]


@calendar.tool()
def refuse(reason: str) -> str:
    """A tool that always fails."""
    raise ValueError(f"refused: {reason}")


@calendar.tool()
def slow(seconds: float) -> str:
    """Answers after ``seconds``."""
    time.sleep(seconds)
    return "slept"


@calendar.tool()
def crash() -> str:
    """Stops the server at once, as a crash would."""
    os._exit(3)


@calendar.prompt()
def plan_day(day: str, request: str, mood: str = "calm") -> str:
    """How to plan a day."""
    return (
        f"You plan a {mood} {day} for the user with the calendar's tools. The user asks: {request}"
    )


def _require_token(app, token: str):
    """The ASGI app, answering 401 to HTTP requests without the bearer token."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return guarded


def serve_http() -> None:
    import uvicorn

    app = calendar.streamable_http_app()
    token = os.environ.get("CALENDAR_TOKEN")
    if token:
        app = _require_token(app, token)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    server.run(sockets=[sock])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    if parser.parse_args().http:
        serve_http()
    else:
        calendar.run()
    sys.exit(0)
