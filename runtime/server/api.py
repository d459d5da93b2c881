"""The agent service over HTTP: every route is one call of the public API (`chronicle.Chronicle`).

The server adds no use case of its own. Inputs are recorded before the answer (201/202), and the
server's own worker loop runs them, as would any `chronicle worker` on the same database. The
event stream of a session is derived from the log (runtime/live_from_log.py), so it is the same
whichever process ran the turn, and a client that reconnects with `Last-Event-ID` misses nothing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Literal, cast

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from chronicle.client import Chronicle
from chronicle.errors import ChronicleError
from chronicle.runtime.agents.registry import MAIN, AgentRegistry, RegistryError, find_registry
from chronicle.runtime.app import queries
from chronicle.runtime.app.errors import UNAVAILABLE, DefinitionError
from chronicle.runtime.app.resume import submit
from chronicle.runtime.app.specs import resolve_workspace
from chronicle.runtime.app.worker import Overrides, Worker, WorkerOptions, repairing
from chronicle.runtime.app.worker_progress import WorkerProgress
from chronicle.runtime.bounds import LARGEST
from chronicle.runtime.environment import environment
from chronicle.runtime.import_paths import bind, using
from chronicle.runtime.loop import LoopOptions
from chronicle.runtime.off_loop import off_the_loop
from chronicle.runtime.settings import SettingsError
from chronicle.runtime.store_open import store_gone, told_at_once_when_refused

from .auth import TokenGate, app_path, presents_token
from .bodies import (
    ApproveBody,
    CancelBody,
    CompactBody,
    DenyBody,
    ForkBody,
    ModelBody,
    NewInput,
    NewSession,
    RedoBody,
    SteerBody,
    UndoBody,
    WebhookBody,
)
from .body_limit import BodyLimit
from .channels import ChannelConfig, ChannelError, Coalescer, load_channels
from .cross_site import CrossSiteGuard
from .draining import DRAIN_S, Drain
from .error_answers import answer_errors
from .event_stream import (
    STREAM_RETRY_S,
    TOO_MANY_STREAMS,
    LogHead,
    OpenStreams,
    event_stream,
    past_the_head,
    resume_position,
    stream_limit,
)
from .head_requests import HeadAsGet
from .openapi_errors import document_errors
from .outbox import Outbox, post
from .routing import Router, sender_spec
from .server_config import ServerConfig, refused_settings
from .server_notes import hook_notes, input_notes, notes_of

log = logging.getLogger("chronicle.server")

#: What every route answers when the app's lifespan never ran: Starlette does not run a mounted app's.
NO_LIFESPAN = ("this Chronicle app's lifespan never ran, so its worker and outbox did not start (a host application that "
               "mounts it must enter it: FastAPI(lifespan=lambda _: chronicle_app.router.lifespan_context(chronicle_app)); "
               "see docs/server.md#in-your-own-application)")

#: Seconds a stopping server gives its outbox to send the replies of the turns its worker finished (the worker's own
#: limit is the drain's: `ServerConfig.drain_s`, draining.py); any left are sent after a restart.
WORKER_DRAIN_S = 30


def create_app(config: ServerConfig) -> FastAPI:
    """The server's app; a setting, a code-defined agent or a chronicle.toml table ([channels], [routines]) that cannot
    work is a DefinitionError (ChronicleError code 2, also the ValueError a blank token raised before), as `serve`
    exits 2 with the same words."""
    if refusal := refused_settings(config):
        raise DefinitionError(refusal)
    try:
        return _build_app(config)
    except (ChannelError, SettingsError) as exc:  # SettingsError: a [routines] table that does not load
        raise DefinitionError(str(exc)) from None


def _build_app(config: ServerConfig) -> FastAPI:
    chronicle = Chronicle(config.db)
    if config.store is not None:
        chronicle._store = config.store
    try:
        return _serving(config, chronicle)
    except BaseException:
        # The store is open by now (the router and outbox read it): a channel that cannot start a session is refused
        # after that, and a program catching the ChronicleError must not leave the store to the collector.
        chronicle.close()
        raise


def _serving(config: ServerConfig, chronicle: Chronicle) -> FastAPI:
    library = {agent.name: agent for agent in config.library}
    toml = config.agents or ((config.workspace or Path.cwd()) / "chronicle.toml")
    channels = load_channels(toml)
    router = Router(chronicle.store, {name: sender_spec(name, c, config.workspace, config.agents, library)
                                      for name, c in channels.items() if c.route == "per_sender"})
    backoff = environment().server_reply_backoff_s
    outbox = Outbox(chronicle.store, channels, router.touched, workspace=config.workspace or Path.cwd(),
                    sender=lambda url, payload: post(url, payload, backoff=backoff))
    server_notes = notes_of(config, channels, library, outbox)  # `serve` prints them at start (notify's) or its worker logs them

    def record_input(channel: str, target: ChannelConfig, senders: list[str], text: str) -> None:
        try:
            router.record(channel, target, senders, text)
        except Exception as exc:  # noqa: BLE001 - a timer callback has no caller to tell; the log does
            log.error("channel %s: the input of %s could not be recorded: %s", channel, ", ".join(senders), exc)

    # A burst's timer fires on the event loop; its write goes to one thread of its own (in order,
    # and never holding requests while the database is slow or being retried).
    recorder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chronicle-channel")
    coalescer = Coalescer(lambda *args: recorder.submit(record_input, *args))
    #: The worker and its thread once the lifespan has started them (/healthz's `worker`).
    working: list[tuple[Worker, threading.Thread]] = []
    streams = OpenStreams(stream_limit(environment().server_max_streams))  # /healthz's `streams`
    drain = Drain(DRAIN_S if config.drain_s is None else config.drain_s)
    drain.on_begin = lambda: coalescer.flush_all(channels)  # a burst held in memory is recorded, not lost at the stop
    def stopping() -> bool:
        """Whether the server is stopping: `chronicle serve` sets app.state.stopping once the app is made."""
        return bool(getattr(app.state, "stopping", lambda: False)())

    log_head = LogHead(chronicle, stopping=stopping)  # one look at the log's head for every open stream

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            told_at_once_when_refused(chronicle.store)
        except BaseException:
            chronicle.close()  # the server does not start: its store is not left open either
            raise
        worker = None
        thread = None
        if config.run_worker:
            # Each session runs in the workspace it recorded: `workspace` is only the default of those started here
            # (an override ran a session whose POST /sessions named another directory in this one).
            overrides = Overrides(options=LoopOptions(auto_approve=config.auto_approve))
            # Its lines are `chronicle worker`'s, through the same Worker.log (secrets masked): `serve` prints them on
            # stderr as the command does; a program gets them on the `chronicle.server` logger unless it says where.
            worker = Worker(chronicle.store, overrides, WorkerOptions(concurrency=config.worker_concurrency or WorkerOptions.concurrency, poll_s=0.2),
                            log=config.worker_log or log.info, name=None)
            repairing(worker)  # as every worker: stuck turns handed to resume, broken tools reported (`chronicle repairs`)
            # Turns run on an event loop of their own: the loop makes its store writes where it
            # runs, and on this loop each would hold every request and stream while it waited
            # (for the whole retry of a lost database: /healthz timed out at 30 s).
            thread = threading.Thread(target=_run_worker, args=(worker,), name="chronicle-worker", daemon=True)
            thread.start()
            working.append((worker, thread))
            drain.attach(worker, thread)
        outbox.start()  # replies of channel turns, whichever process ran them
        app.state.lifespan_entered = True
        try:
            yield
        finally:
            drain.begin()  # begun already when `serve` drained before stopping (its first signal)
            coalescer.flush_all(channels)
            await off_the_loop(recorder.shutdown, True)  # every burst recorded before the store closes
            if thread is not None:
                await off_the_loop(thread.join, drain.left_s())  # the turns in hand finish, or are left to recovery
            await off_the_loop(outbox.stop, WORKER_DRAIN_S)  # their replies too; any left are sent after a restart
            chronicle.close()

    def store_still_there(request: Request) -> None:
        """Every route but /healthz (which says it its own way): a store gone under the server (an SQLite file
        deleted or replaced, a database dropped and created again: `store_gone`) is 503, reads included, which would
        answer from a file no path names any more, or from sessions the database no longer holds. And an app whose
        lifespan never ran (mounted in a host application that does not enter it) is 503 saying so: its worker and
        outbox never started, so a session it accepted would wait for ever."""
        if not getattr(app.state, "lifespan_entered", False):
            raise ChronicleError(NO_LIFESPAN, 1, kind=UNAVAILABLE)  # 503 with code 1, in the operator's log too
        if app_path(request.scope) != "/healthz" and (gone := store_gone(chronicle.store)) is not None:
            raise gone

    app = FastAPI(title="Chronicle", version="1", lifespan=lifespan, dependencies=[Depends(store_still_there)],
                  description="An event-sourced agent runtime: every decision is an event you can audit, undo, replay and resume.")
    app.state.chronicle = chronicle
    app.state.config = config
    app.state.outbox = outbox
    app.state.drain = drain  # `chronicle serve` begins it at its first signal (runtime/cli/serve_drain.py)

    # Every path but /healthz needs the token, the API docs and unknown paths too (auth.py); no
    # body is read past the limit (body_limit.py); before either, a request a web page could have made
    # unasked is refused, token or not (cross_site.py). The last added runs first.
    app.add_middleware(BodyLimit, limit=config.max_body_bytes or environment().server_max_body_bytes)
    app.add_middleware(TokenGate, token=config.token.strip() if config.token else None)
    app.add_middleware(HeadAsGet)  # HEAD on every GET route, the viewer's and the docs' too (head_requests.py)
    app.add_middleware(CrossSiteGuard, allowed_hosts=environment().server_allowed_hosts)

    answer_errors(app)  # how a failure becomes an HTTP answer (error_answers.py)
    document_errors(app)  # and /openapi.json says so (openapi_errors.py)

    def worker_status() -> dict[str, Any]:
        """/healthz's `worker`: whether the server's worker runs, and how far it has looked (worker_progress.py)."""
        if not working:
            return WorkerProgress().row(False, None)
        worker, thread = working[0]
        return worker.progress.row(thread.is_alive() and not worker.draining, worker.options.concurrency)

    @app.get("/healthz", response_model=None)  # HEAD too, as load balancers check, as on every GET route (head_requests.py)
    def healthz(request: Request) -> dict[str, Any] | JSONResponse:
        """Never needs the token; `notes` (the server's settings it does not use), `outbox` (how far the replies
        owed have been looked for, outbox_progress.py), `worker` (how far the server's worker has looked for work,
        worker_progress.py) and `streams` (the live event streams open, event_stream.py) only for a caller that sends it.

        503 `{"status": "store_gone"}` (and its `error` for a caller with the token) once the store is gone under the
        server (`store_gone`): nothing can be recorded any more and only a restart cures it, so a supervisor watching
        this restarts it. A lost database is still "ok": it may come back, and is waited for. 503 `{"status": "draining"}`
        while the server stops (draining.py): up, answering reads, finishing its turns, taking no new work, so a
        load balancer sends the new work elsewhere; a caller with the token also gets `draining` (in hand, seconds left)."""
        shown = not config.token or presents_token(request, config.token.strip())
        gone = store_gone(chronicle.store)
        if gone is not None:
            return JSONResponse({"status": "store_gone", **({"error": str(gone)} if shown else {})}, status_code=503)
        said: dict[str, Any] = {"status": "draining" if drain.draining else "ok"}
        if shown:
            said |= {"notes": server_notes, "outbox": outbox.status(), "worker": worker_status(), "streams": streams.row()}
            said |= {"draining": drain.row()} if drain.draining else {}
        return JSONResponse(said, status_code=503) if drain.draining else said

    @app.get("/sessions")
    def list_sessions(all: bool = False) -> list[dict[str, Any]]:
        """`?all=true`: archived sessions too, as `sessions --all`."""
        return chronicle.sessions(all=all)

    starts_work = [Depends(drain.refuse_new_work)]  # refused while the server drains (draining.py)

    @app.post("/sessions", status_code=201, dependencies=starts_work)
    def create_session(body: NewSession) -> dict[str, Any]:
        workspace = Path(body.workspace) if body.workspace else config.workspace
        provider, model, registry = body.provider, body.model, None
        coded = library.get(body.agent or "")
        if coded is not None:
            provider, model = provider or coded.provider, model or coded.model
            with _errors():
                registry = _registry_of(coded, workspace)
        elif body.agent not in (None, MAIN):
            registry = _file_registry(config.agents, workspace, body.agent or "", sorted(library))
        with _errors(), using(coded._live if coded is not None else None):
            done = submit(chronicle.store, body.prompt, provider=provider, model=model, workspace=workspace,
                          agents=config.agents, registry=registry)
        if coded is not None:  # its worker runs the objects this Agent was given (runtime/import_paths.py)
            bind(done.session_id, coded._live)
        return {**done.row(), "notes": input_notes(chronicle.store, done.session_id, config.run_worker, started=True)}

    @app.get("/agents")
    def list_agents(workspace: str | None = None) -> list[dict[str, Any]]:
        """The agents `POST /sessions` may start (`agent`): the registry file's, then those defined in code."""
        with _errors():
            where = resolve_workspace(Path(workspace) if workspace else config.workspace)
        try:
            found = find_registry(config.agents, where)
        except RegistryError as exc:
            raise HTTPException(status_code=400, detail=f"agents: {exc}") from None
        rows = [_agent_row(found.main, "file" if found.source else "default")]
        rows += [_agent_row(a, "file") for a in found.agents]
        rows = [r for r in rows if r["name"] not in library]
        return rows + [_agent_row(a.definition(True), "code") for a in library.values()]

    @app.post("/sessions/{session_id}/inputs", status_code=202, dependencies=starts_work)
    def add_input(session_id: str, body: NewInput) -> dict[str, Any]:
        with _errors():
            done = submit(chronicle.store, body.prompt, session=session_id)
        return {**done.row(), "notes": input_notes(chronicle.store, done.session_id, config.run_worker)}

    @app.get("/sessions/{session_id}/history")
    def history(session_id: str, at: int | None = None, version: int | None = None, step: int | None = None) -> list[dict[str, Any]]:
        return chronicle.history(session_id, at=at, version=version, step=step)

    @app.get("/sessions/{session_id}/log")
    def session_log(session_id: str, tree: bool = False) -> list[dict[str, Any]]:
        return chronicle.log(session_id, tree=tree)

    @app.get("/sessions/{session_id}/audit")
    def audit(session_id: str, tool: str | None = None, errors: bool = False, since: str | None = None,
              limit: int | None = None, last: int | None = None) -> list[dict[str, Any]]:
        return chronicle.audit(session=session_id, tool=tool, errors=errors, since=since, limit=limit, last=last)

    @app.get("/sessions/{session_id}/why")
    def why(session_id: str, call: str | None = None, turn: int | None = None) -> dict[str, Any]:
        return chronicle.why(session_id, call, turn=turn)

    @app.get("/verify")
    def verify_all() -> dict[str, Any]:
        return chronicle.verify()

    @app.get("/sessions/{session_id}/verify")
    def verify(session_id: str) -> dict[str, Any]:
        return chronicle.verify(session_id)

    @app.get("/sessions/{session_id}/export")
    def export(session_id: str) -> dict[str, Any]:
        return chronicle.export(session_id)

    @app.get("/sessions/{session_id}/notes")
    def notes(session_id: str, at: int | None = None) -> list[dict[str, Any]]:
        return chronicle.notes(session_id, at=at)

    @app.get("/sessions/{session_id}/cost")
    def cost(session_id: str, by: str | None = None) -> list[dict[str, Any]]:
        return chronicle.cost(session_id, by=by)

    @app.post("/sessions/{session_id}/approve")
    def approve(session_id: str, body: ApproveBody | None = None, actor: str | None = Depends(caller)) -> list[dict[str, Any]]:
        body = body or ApproveBody()
        return chronicle.approve(session_id, tool_call=body.tool_call, always=body.always, actor=actor)

    @app.post("/sessions/{session_id}/deny")
    def deny(session_id: str, body: DenyBody | None = None, actor: str | None = Depends(caller)) -> list[dict[str, Any]]:
        body = body or DenyBody()
        return chronicle.deny(session_id, reason=body.reason, tool_call=body.tool_call, actor=actor)

    @app.post("/sessions/{session_id}/steer")
    def steer(session_id: str, body: SteerBody, actor: str | None = Depends(caller)) -> dict[str, Any]:
        return chronicle.steer(session_id, body.message, wait_batch=body.wait_batch, actor=actor, turn=body.turn_id)

    @app.post("/sessions/{session_id}/cancel")
    def cancel(session_id: str, body: CancelBody | None = None, actor: str | None = Depends(caller)) -> dict[str, Any]:
        return chronicle.cancel(session_id, wait_s=(body or CancelBody()).wait, actor=actor)

    @app.post("/sessions/{session_id}/undo")
    def undo(session_id: str, body: UndoBody | None = None, actor: str | None = Depends(caller)) -> dict[str, Any]:
        body = body or UndoBody()
        return chronicle.undo(session_id, turns=body.turns, files=body.files, actor=actor, workspace=body.workspace)

    @app.post("/sessions/{session_id}/redo")
    def redo(session_id: str, body: RedoBody | None = None, actor: str | None = Depends(caller)) -> dict[str, Any]:
        return chronicle.redo(session_id, files=(body or RedoBody()).files, actor=actor)

    @app.post("/sessions/{session_id}/fork")
    def fork(session_id: str, body: ForkBody | None = None, actor: str | None = Depends(caller)) -> dict[str, Any]:
        """`fork --json`'s object: `forked_from` as recorded (the session, the turn it was made at, also without `at`,
        and who forked: the caller's X-Chronicle-Actor, else the server's identity, as every other decision)."""
        from chronicle.runtime.app import timetravel as app_timetravel

        body = body or ForkBody()
        with _errors():
            parent = str(queries.session_id(chronicle.store, session_id))
            child = app_timetravel.fork(chronicle.store, parent, body.at, actor=actor)
            # a turn an undo took back is forked as `fork --at` forks it, and said as its note: line says it
            note = app_timetravel.undone_note(chronicle.store, child)
        return {"session_id": str(child.id), "forked_from": child.forked_from, **({"note": note} if note else {})}

    @app.get("/sessions/{session_id}/model")
    def model(session_id: str) -> dict[str, Any]:
        return chronicle.model(session_id)

    @app.post("/sessions/{session_id}/model")
    def set_model(session_id: str, body: ModelBody, actor: str | None = Depends(caller)) -> dict[str, Any]:
        """Recorded (Session.ModelChanged) with the caller as actor; a running turn keeps its model (`applies_from`)."""
        return chronicle.set_model(session_id, body.model, thinking_tokens=body.thinking_tokens, actor=actor)

    @app.post("/sessions/{session_id}/compact")
    def compact(session_id: str, body: CompactBody | None = None) -> dict[str, Any]:
        body = body or CompactBody()
        return chronicle.compact(session_id, strategy=body.strategy, keep=body.keep)

    @app.post("/hooks/{channel}", status_code=202, dependencies=starts_work)
    async def webhook(channel: str, body: WebhookBody) -> dict[str, Any]:
        """Feed a channel's session (its one, or with route = "per_sender" the sender's own); a sender's
        burst within `coalesce_s` becomes one input, recorded with the channel and the sender."""
        if channel not in channels:
            known = ", ".join(sorted(channels)) or "none configured"
            raise HTTPException(status_code=404, detail=f"channel: no channel {channel!r} ([channels.NAME] in chronicle.toml: {known})")
        if not channels[channel].takes_input:
            raise HTTPException(status_code=409, detail=f"channel {channel} takes no input: it only sends notifications "
                                                        '(it has a reply_url and no session = … or route = "per_sender")')
        text = body.content()
        if not text:
            raise HTTPException(status_code=422, detail="text: the webhook carries no text (send text, prompt or message)")
        sender = (body.sender or "").strip() or "anonymous"
        if len(sender) > 200 or not sender.isprintable():
            raise HTTPException(status_code=422, detail="sender: a printable id of at most 200 characters")
        target = channels[channel]
        with _errors():
            sid, existed = await off_the_loop(router.session_for, channel, target, sender)
            if target.coalesce_s == 0:  # recorded before the answer says so; a failure is the answer
                sid = await off_the_loop(router.record, channel, target, [sender], text)
        held = 0 if target.coalesce_s == 0 else coalescer.add(channel, target, sender, text)
        notes = await off_the_loop(hook_notes, chronicle.store, sid, existed, held == 0, target, library, config.run_worker)
        return {"channel": channel, "session_id": str(sid), "route": target.route, "sender": sender,
                "recorded": held == 0, "coalescing": held, "coalesce_s": target.coalesce_s, "notes": notes}

    @app.get("/sessions/{session_id}/events")
    async def events(session_id: str, request: Request, last_event_id: str | None = Header(default=None),
                     after: int | None = Query(None, ge=0, le=LARGEST), follow: bool = True) -> StreamingResponse:
        start, named = (after, "after") if after is not None else (resume_position(last_event_id), "Last-Event-ID")
        with _errors():
            sid = await off_the_loop(queries.session_id, chronicle.store, session_id)
        head = await off_the_loop(chronicle.store.max_position)
        if start > (head or 0):
            raise HTTPException(status_code=400, detail=past_the_head(named, start, head or 0))
        if streams.full():  # the descriptors left are kept for /healthz and the API (event_stream.stream_limit)
            raise HTTPException(status_code=503, detail=TOO_MANY_STREAMS.format(limit=streams.limit),
                                headers={"Retry-After": str(STREAM_RETRY_S)})
        stream = streams.counted(event_stream(chronicle, str(sid), start, follow, request.is_disconnected, stopping, log_head))
        return StreamingResponse(stream, media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    from .viewer import mount_viewer

    mount_viewer(app, chronicle)
    return app


def _registry_of(agent: Any, workspace: Path | None) -> AgentRegistry:
    try:
        return cast(AgentRegistry, agent.registry(workspace))
    except (ValueError, TypeError) as exc:
        raise ChronicleError(str(exc), 2) from None


def _file_registry(agents: Path | None, workspace: Path | None, name: str, coded: list[str]) -> AgentRegistry:
    """The registry file's agents with NAME on top; an unknown name is a 400 naming the field and the choices."""
    with _errors():
        where = resolve_workspace(workspace)
    try:
        found = find_registry(agents, where)
    except RegistryError as exc:
        raise HTTPException(status_code=400, detail=f"agent: {exc}") from None
    if name not in found.names():
        known = ", ".join([*found.names(), *coded])
        raise HTTPException(status_code=400, detail=f"agent: unknown agent {name!r}; agents: {known} "
                                                    "([agents.NAME] in chronicle.toml or --agents; GET /agents lists them)")
    return found.starting_as(name)


def _agent_row(spec: Any, source: str) -> dict[str, Any]:
    return {"name": spec.name, "description": spec.description, "model": spec.model or None, "tools": list(spec.tools),
            "source": source}


def caller(x_chronicle_actor: str | None = Header(default=None)) -> str | None:
    """Who the HTTP client says decides (`X-Chronicle-Actor`), recorded as the decision's actor;
    without it the server's own identity (CHRONICLE_ACTOR, else user@host) is recorded, as for the CLI."""
    if x_chronicle_actor is None:
        return None
    try:  # HTTP hands a header over as latin-1 text: a UTF-8 name (José) came out as JosÃ© and was recorded so
        name = x_chronicle_actor.encode("latin-1").decode("utf-8").strip()
    except (UnicodeEncodeError, UnicodeDecodeError):
        raise HTTPException(status_code=422, detail="X-Chronicle-Actor: a name in UTF-8") from None
    if not name or len(name) > 100 or not name.isprintable():
        raise HTTPException(status_code=422, detail="X-Chronicle-Actor: a printable name of 1 to 100 characters")
    return name


class _errors:
    """ChronicleError from a use case called outside the facade: the same JSON error as the facade's."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> Literal[False]:
        from chronicle.runtime.app.errors import NOT_FOUND, AppError
        from chronicle.runtime.shred_marks import ForgottenContent
        from chronicle.runtime.store import ForgottenSession, NotFound

        if isinstance(exc, AppError):
            raise ChronicleError(str(exc), exc.code, kind=exc.kind) from None
        if isinstance(exc, ForgottenSession):  # found, but erased: code 1 (409), as a refused write
            raise ChronicleError(str(exc), 1) from None
        if isinstance(exc, NotFound):
            raise ChronicleError(str(exc), 2, kind=NOT_FOUND) from None
        if isinstance(exc, ForgottenContent):  # forgotten by another process since this server read it
            raise ChronicleError(str(exc), 1) from None
        return False


def _run_worker(worker: Worker) -> None:
    """The server's worker, on its own thread and event loop, until it has drained."""
    try:
        asyncio.run(worker.run())
    except Exception:  # noqa: BLE001 - the server keeps answering; the log says why turns stopped
        log.exception("the server's worker stopped")
