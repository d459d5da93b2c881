"""`chronicle serve`: the agent service and audit viewer over HTTP (needs the `server` extra)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from .common import DbOption, cli_errors, err_console, fail, finite_at_least, locate_store, log_line, open_located
from .pipes import keep_going

#: Seconds a stopping server gives open requests (live event streams) before ending them.
SHUTDOWN_GRACE_S = 3


def serve(
    host: Annotated[str, typer.Option("--host", help="Address to bind; anything but loopback needs CHRONICLE_SERVER_TOKEN")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="TCP port (0: any free one)")] = 8765,
    db: DbOption = None,
    workspace: Annotated[Optional[Path], typer.Option("--workspace", help="Default workspace of sessions started over HTTP",
                                                      show_default=False)] = None,
    agents: Annotated[Optional[Path], typer.Option("--agents", help="Agent registry (chronicle.toml); POST /sessions may start any of its agents by name", show_default=False)] = None,
    no_worker: Annotated[bool, typer.Option("--no-worker", help="Record inputs only; leave running them to `chronicle worker`")] = False,
    concurrency: Annotated[Optional[int], typer.Option("--concurrency", min=1, help="Sessions the server's worker advances at once (default 4)",
                                                       show_default=False)] = None,
    drain_s: Annotated[Optional[float], typer.Option("--drain-s", callback=finite_at_least(0),
                                                     help="Seconds a stopping server waits for the turns in hand (default 30)",
                                                     show_default=False)] = None,
) -> None:
    """Serve the agent over HTTP: JSON routes mirroring the CLI, live events as Server-Sent Events, OpenAPI at /docs.

    Binds to loopback unless --host says otherwise; any other address requires CHRONICLE_SERVER_TOKEN, sent by clients as `Authorization: Bearer TOKEN` on every route but /healthz.

    SIGTERM or Ctrl-C: drain (new work refused with 503, /healthz 503 draining, reads go on) until the turns in hand have ended or --drain-s has passed, then exit 0; a second one exits at once (the turns stay in flight, left to their leases).
    """
    keep_going()  # a reader of stdout going away must not abandon a turn (cli/pipes.py)
    with cli_errors():
        from chronicle.runtime.environment import EnvironmentSettingError, environment

        try:
            limit = environment().server_max_body_bytes
        except EnvironmentSettingError as exc:
            fail(str(exc), 2)
        given = os.environ.get("CHRONICLE_SERVER_TOKEN")
        if given and not given.strip():
            # It would be accepted here and then match no request: every one a 401.
            fail("CHRONICLE_SERVER_TOKEN is blank (spaces only): set a token, or unset the variable", 2)
        token = (given or "").strip() or None  # a header cannot carry surrounding spaces
        if no_worker and concurrency is not None:  # taken, and then no worker here to use it
            fail("--concurrency is the server's worker's, and --no-worker runs none: leave one out "
                 "(`chronicle worker --concurrency K` sets the worker that runs the sessions)", 2)
        if no_worker and drain_s is not None:  # nothing here would be waited for
            fail("--drain-s is how long a stopping server waits for its worker's turns, and --no-worker runs none: "
                 "leave one out (a `chronicle worker` finishes its own turns when told to stop)", 2)
        from chronicle.runtime.server.loopback import loopback_name

        if not loopback_name(host.strip().lower().rstrip(".")) and not token:
            fail(f"refusing to serve on {host} without a token: set CHRONICLE_SERVER_TOKEN (clients send it as "
                 "Authorization: Bearer TOKEN), or bind to 127.0.0.1", 2)
        try:
            import uvicorn

            from chronicle.runtime.server.api import ServerConfig, create_app
        except ImportError as exc:
            fail(f"the server needs its extra: pip install 'chronicle-agent[server]' ({exc})", 2)
        from chronicle.runtime.collector import start_up_done
        from chronicle.runtime.pasteable import plain_hints
        from chronicle.runtime.routines import RoutineError
        from chronicle.runtime.server.channels import ChannelError
        from chronicle.runtime.stack_dumps import dump_stacks_on_signal

        # Nothing is said to be served until it can be: a --db that cannot work, a port in use and a
        # database that cannot be opened are each one line (the other commands' own for the store),
        # not "serving on …" and then a traceback from the first use of the store or from the bind.
        url, _ = locate_store(db)
        plain_hints()  # the answers' hints are read on other machines: they name no database of ours
        listener = listen(host, port)
        store = open_located(url)
        try:
            app = create_app(ServerConfig(db=url, workspace=workspace.resolve() if workspace else None, agents=agents, token=token,
                                          max_body_bytes=limit, run_worker=not no_worker, worker_concurrency=concurrency,
                                          drain_s=drain_s, worker_log=None if no_worker else log_line, store=store))
            posted, not_here = app.state.outbox.notifying()
        except (ChannelError, RoutineError) as exc:
            fail(str(exc), 2)
        start_up_done()  # the app and its store are built: what a server holds from here on is collected as usual
        dump_stacks_on_signal()  # `kill -USR1 PID`: every thread's stack on stderr, for a request that never ends
        from chronicle.runtime.server.accept_flood import quiet_accept_failures

        quiet_accept_failures()  # at its descriptor limit, asyncio's accept failure once in 30 s, not 1,000 times a second
        shown = f"[{host.strip('[]')}]" if ":" in host else host
        err_console.print(f"chronicle: serving on http://{shown}:{listener.getsockname()[1]}/ (API docs at /docs)"
                          f"{' with a token' if token else ''}", soft_wrap=True)
        notify_lines(app.state.outbox, posted, not_here)
        from .serve_drain import DrainingServer

        # The first signal drains with the port open (serve_drain.py); the streams go on meanwhile. A live event
        # stream lasts as long as its session runs, and uvicorn's graceful shutdown waits for open requests: told
        # that the server is stopping, streams end at their next poll, and any other request still open is ended
        # after a few seconds. A client that follows reconnects with Last-Event-ID and misses nothing.
        server = DrainingServer(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                               timeout_graceful_shutdown=SHUTDOWN_GRACE_S), app.state.drain, log_line)
        app.state.stopping = lambda: server.should_exit
        server.run(sockets=[listener])


def notify_lines(outbox: Any, posted: dict[str, list[str]], not_here: dict[str, list[str]]) -> None:
    """Which routines' findings this server posts, and where: a person whose heartbeat notifies a channel
    learns here that this is the process it depends on (nothing at all when no routine notifies)."""
    from rich.markup import escape

    from chronicle.runtime.server.outbox import safe_receiver

    for channel, names in posted.items():
        receiver = safe_receiver(outbox.channels[channel].reply_url)
        err_console.print(f"chronicle: notify: posting the findings of routine{'s' if len(names) > 1 else ''} "
                          f"{escape(', '.join(names))} to channel {escape(channel)} ({escape(receiver)})", soft_wrap=True)
    for channel, names in not_here.items():
        err_console.print(f"[dim]notify: not posting the findings of {escape(', '.join(names))}: channel {escape(channel)} "
                          "has no reply_url among this server's channels[/]", soft_wrap=True)


def listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound (uvicorn listens on it); a host or port that cannot be had is one line, exit 2."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        sock.bind(address)
    except OSError as exc:
        fail(f"cannot listen on {host} port {port}: {exc.strerror or exc}; choose another --port (0: any free one) "
             "or --host", 2)
    return sock
