"""Routines as chronicle.toml declares them: a trigger, a prompt, an action and guardrails.

    [routines.todo_check]
    trigger = "cron:*/5 * * * *"     # or "event:Turn.Failed" (a pattern over Aggregate.Event), or "manual"
    prompt = "Check TODO.md and report what is overdue."
    action = "lightweight"           # the routine's own session, one input per run; "job": a new session per run
    max_runs_per_day = 10            # guardrails, all optional
    budget_usd = 0.50                # a day's spend of the routine's runs
    cooldown_s = 60
    notify = "ops"                   # a [channels.NAME] with a reply_url: findings are POSTed there (server/notify.py)

    [routines.heartbeat]
    heartbeat = true                 # the prompt is HEARTBEAT.md (skipped while it is missing or empty)
    trigger = "cron:*/30 * * * *"    # the default for a heartbeat

Parsing lives here; firing and settling in runtime/routine_engine.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from croniter import CroniterBadDateError, croniter  # type: ignore[import-untyped]

from .settings import CONFIG_FILE, SettingsError, named_tables

TRIGGER_KINDS = ("cron", "event", "manual")


def fires(expression: str) -> bool:
    """Five fields (croniter also takes a sixth, seconds, which would fire a routine every few seconds)
    naming a time that comes round: `0 0 31 2 *` is well formed but never due, and asking it for its
    next time raised inside the worker's tick, stopping every other routine of the workspace too."""
    if len(expression.split()) != 5 or not croniter.is_valid(expression):
        return False
    try:
        croniter(expression, datetime(2000, 1, 1, tzinfo=timezone.utc)).get_next(datetime)
    except (CroniterBadDateError, ValueError):
        return False
    return True
ACTIONS = ("lightweight", "job")
KEYS = {"trigger", "prompt", "action", "max_runs_per_day", "budget_usd", "cooldown_s", "heartbeat", "description", "notify"}
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
HEARTBEAT_FILE = "HEARTBEAT.md"
HEARTBEAT_TRIGGER = "cron:*/30 * * * *"
HEARTBEAT_OK = "HEARTBEAT_OK"
HEARTBEAT_PROMPT = (
    "Heartbeat: go through the checklist below (from HEARTBEAT.md). Report anything that needs attention; "
    f"if nothing does, answer exactly {HEARTBEAT_OK}."
)


class RoutineError(SettingsError):
    """A [routines.NAME] table cannot be used; the message names the key."""


@dataclass(frozen=True)
class Routine:
    name: str
    #: "cron:EXPR", "event:PATTERN" or "manual"; left empty, a heartbeat's default (every 30 minutes) and for any
    #: other routine the error a [routines.NAME] table without one gets, as the table leaves the key out.
    trigger: str = ""
    #: The input of each run; a heartbeat's is HEARTBEAT.md, this text (if any) added after its preamble.
    prompt: str = ""
    action: str = "lightweight"
    max_runs_per_day: int | None = None
    budget_usd: float | None = None
    cooldown_s: float | None = None
    heartbeat: bool = False
    #: The channel (a [channels.NAME] with a reply_url) a run's findings are posted to; None: kept in its session only.
    notify: str | None = None

    @property
    def kind(self) -> str:
        return self.trigger.split(":", 1)[0]

    @property
    def pattern(self) -> str:
        return self.trigger.split(":", 1)[1] if ":" in self.trigger else ""

    def next_due(self, now: datetime) -> datetime | None:
        if self.kind != "cron":
            return None
        return croniter(self.pattern, now).get_next(datetime)

    def current_slot(self, now: datetime) -> datetime | None:
        """The newest cron time at or before `now`: what a worker fires if nobody has yet."""
        if self.kind != "cron":
            return None
        if croniter.match(self.pattern, now.replace(second=0, microsecond=0)) and now.second == 0 and now.microsecond == 0:
            return now
        return croniter(self.pattern, now).get_prev(datetime)

    def row(self, now: datetime) -> dict[str, Any]:
        due = self.next_due(now)
        return {
            "name": self.name, "trigger": self.trigger, "action": self.action, "next_due": due.isoformat() if due else None,
            "prompt": self.prompt, "heartbeat": self.heartbeat, "max_runs_per_day": self.max_runs_per_day,
            "budget_usd": self.budget_usd, "cooldown_s": self.cooldown_s, "notify": self.notify,
        }


def parse_routine(name: str, table: Any, where: str) -> Routine:
    prefix = f"{where}: routines.{name}"
    if not isinstance(name, str) or not NAME.match(name):  # a Routine made in code may name itself with anything
        raise RoutineError(f"{prefix}: routine names start with a letter and use letters, digits, - and _")
    if not isinstance(table, dict):
        raise RoutineError(f"{prefix} must be a table")
    unknown = sorted(set(table) - KEYS)
    if unknown:
        raise RoutineError(f"{prefix}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(KEYS))}")
    heartbeat = table.get("heartbeat", False)
    if not isinstance(heartbeat, bool):
        raise RoutineError(f"{prefix}: heartbeat must be true or false")
    trigger = table.get("trigger", HEARTBEAT_TRIGGER if heartbeat else None)
    if not isinstance(trigger, str) or not trigger.strip():
        raise RoutineError(f'{prefix}: trigger is required: "cron:EXPR", "event:PATTERN" or "manual"')
    kind, _, rest = trigger.partition(":")
    if kind not in TRIGGER_KINDS or (kind != "manual" and not rest.strip()) or (kind == "manual" and rest):
        raise RoutineError(f'{prefix}: trigger must be "cron:EXPR", "event:PATTERN" or "manual" (got {trigger!r})')
    if kind == "cron" and not fires(rest.strip()):
        raise RoutineError(f"{prefix}: {rest.strip()!r} is not a cron expression that ever fires "
                           "(five fields: minute hour day month weekday)")
    prompt = table.get("prompt", "")
    if not isinstance(prompt, str) or (not prompt.strip() and not heartbeat):
        raise RoutineError(f"{prefix}: prompt is required (the input each run sends)")
    action = table.get("action", "lightweight")
    if action not in ACTIONS:
        raise RoutineError(f"{prefix}: action must be lightweight or job (got {action!r})")
    numbers: dict[str, Any] = {}
    for key in ("max_runs_per_day", "budget_usd", "cooldown_s"):
        value = table.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise RoutineError(f"{prefix}: {key} must be a non-negative number (got {value!r})")
        numbers[key] = int(value) if key == "max_runs_per_day" else float(value)
    notify = table.get("notify")
    if notify is not None and (not isinstance(notify, str) or not notify.strip()):
        raise RoutineError(f"{prefix}: notify must name a [channels.NAME] table with a reply_url (got {notify!r})")
    return Routine(name=name, trigger=f"{kind}:{rest.strip()}" if rest else kind, prompt=prompt.strip(), action=action,
                   heartbeat=heartbeat, notify=notify.strip() if notify else None, **numbers)


def check_notify(workspace: Path, routines: list[Routine]) -> None:
    """Each `notify` names a channel of the workspace's chronicle.toml that has a reply_url: found out when the
    routines are loaded, not when a run has findings that nobody can be told of."""
    wanted = [r for r in routines if r.notify]
    if not wanted:
        return
    from .server.channels import ChannelError, load_channels  # pydantic only; read when a routine notifies

    path = workspace / CONFIG_FILE
    try:
        channels = load_channels(path)
    except ChannelError as exc:
        raise RoutineError(str(exc)) from None
    for routine in wanted:
        config = channels.get(routine.notify or "")
        if config is None:
            known = ", ".join(sorted(channels)) or "none"
            raise RoutineError(f"{path}: routines.{routine.name}: notify: no channel {routine.notify!r} "
                               f"([channels.NAME] with a reply_url; channels: {known})")
        if config.reply_url is None:
            raise RoutineError(f"{path}: routines.{routine.name}: notify: channel {routine.notify!r} has no reply_url "
                               "to post the findings to")


def load_routines(workspace: Path) -> list[Routine]:
    """The workspace's routines in the order chronicle.toml declares them."""
    where = str(workspace / CONFIG_FILE)
    routines = [parse_routine(name, table, where) for name, table, _ in named_tables(workspace, "routines", None, RoutineError)]
    check_notify(workspace, routines)
    return routines


def find_routine(workspace: Path, name: str) -> Routine:
    routines = load_routines(workspace)
    found = next((r for r in routines if r.name == name), None)
    if found is None:
        names = ", ".join(r.name for r in routines) or "none"
        where = workspace / CONFIG_FILE if (workspace / CONFIG_FILE).is_file() else \
            f"{workspace} (it has no {CONFIG_FILE} to define [routines.NAME] in)"
        raise RoutineError(f"no routine named {name!r} in {where}; routines: {names}")
    return found


def heartbeat_prompt(routine: Routine, workspace: Path) -> str | None:
    """The heartbeat's input, or None while HEARTBEAT.md is missing or has nothing but headings and blanks."""
    path = workspace / HEARTBEAT_FILE
    try:
        checklist = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not any(line.strip() and not line.lstrip().startswith("#") for line in checklist.splitlines()):
        return None
    extra = f"\n\n{routine.prompt}" if routine.prompt else ""
    return f"{HEARTBEAT_PROMPT}{extra}\n\n<heartbeat_checklist>\n{checklist.strip()}\n</heartbeat_checklist>"
