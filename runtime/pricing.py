"""USD from recorded usage: `price(model, usage, at=date) -> float | None`.

Events hold raw token counts; money is computed from them, so re-pricing never rewrites history.

Where prices come from, in order:
1. An override file named by `CHRONICLE_PRICES` (JSON, our format below): for negotiated rates,
   models the bundled table does not know yet, or corrections. Each model has dated entries;
   the one in force at the call's date applies.
2. The `genai-prices` package's bundled snapshot (the pydantic team's dated, data-driven price
   tables, also used by pydantic-ai). Checked: it prices from its bundled data with no network
   access (we never start its updater), knows dated model ids such as
   `claude-sonnet-4-5-20250929`, cache write/read prices, and long-context tiers. Maintaining
   that table by hand here would only make it go stale faster.

An unknown model prices as None with one warning per model and process — never an exception.
The bundled table is applied through genai-prices' own Anthropic usage extractor, which reads
the usage exactly as the API reports it: `input_tokens` excludes cached tokens, cache writes
split into 5-minute and 1-hour lifetimes (1-hour writes cost more), `server_tool_use`
web searches are billed per request, and `service_tier` selects a price variant.

Override file format:
    {"models": {"claude-x": [{"from": "2026-01-01", "input_mtok": 3, "output_mtok": 15,
                              "cache_write_mtok": 3.75, "cache_write_1h_mtok": 6, "cache_read_mtok": 0.3,
                              "web_search_per_1k": 10}]}}
Prices are USD per million tokens (web searches per thousand requests); a model id with a
`-YYYYMMDD` suffix also matches its base. Omitted cache prices follow Anthropic's multipliers
(5-minute write 1.25×, 1-hour write 2×, read 0.1× the input price).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
from collections.abc import Mapping
from datetime import date, datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

from chronicle.domain.content import TOKEN_FIELDS, Usage

log = logging.getLogger("chronicle.pricing")
#: Models that are not priced and need no warning about it.
UNPRICED_QUIETLY = frozenset({"", "scripted"})
DATE_SUFFIX = re.compile(r"-\d{8}$")
_warned: set[str] = set()


class PriceTableError(ValueError):
    """The override price file cannot be used; the message names the file and the problem."""


def price(model: str, usage: Usage | Mapping[str, Any], at: datetime | date | None = None) -> float | None:
    """USD for one model call, or None when the model has no known price."""
    if not isinstance(usage, Usage):
        usage = as_usage(dict(usage))
    when = _as_datetime(at)
    # A broken CHRONICLE_PRICES file raises PriceTableError: silently falling back would record
    # (and rebuild) costs without the operator's prices. Commands check the file before they start.
    override = _override_price(model, usage, when)
    if override is not None:
        return override
    bundled = _bundled_price(model, usage, when)
    if bundled is not None:
        return bundled
    if model not in UNPRICED_QUIETLY:
        _warn_once(f"no price known for model {model!r}: its cost shows as null (add it to a CHRONICLE_PRICES file)")
    return None


def as_usage(raw: dict[str, Any]) -> Usage:
    """A recorded usage dict as Usage, whatever shape a field has (older or newer records)."""
    try:
        return Usage.model_validate(raw)
    except ValueError:
        return Usage.model_validate({k: v for k, v in raw.items() if k in TOKEN_FIELDS and isinstance(v, int)})


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning("%s", message)


def total(calls: list[tuple[str, Usage | dict[str, Any], datetime | date | None]]) -> float | None:
    """Sum of several calls; None if any call that used tokens could not be priced."""
    usd = 0.0
    for model, usage, at in calls:
        value = price(model, usage, at)
        if value is None:
            if (as_usage(usage) if isinstance(usage, dict) else usage).used:
                return None
            continue
        usd += value
    return round(usd, 6)


def _as_datetime(at: datetime | date | None) -> datetime:
    if at is None:
        return datetime.now(timezone.utc)
    if not isinstance(at, datetime):
        return datetime(at.year, at.month, at.day, tzinfo=timezone.utc)
    return at if at.tzinfo else at.replace(tzinfo=timezone.utc)


# -- the override file ---------------------------------------------------------------------------


def _override_price(model: str, usage: Usage, when: datetime) -> float | None:
    path = os.environ.get("CHRONICLE_PRICES")
    if not path:
        return None
    table = load_override(path)
    entries = table.get(model) or table.get(DATE_SUFFIX.sub("", model))
    if not entries:
        return None
    day = when.date().isoformat()
    current = [e for e in entries if e.get("from", "0000-00-00") <= day]
    if not current:
        return None
    entry = max(current, key=lambda e: e.get("from", ""))
    base = entry.get("input_mtok", 0.0)
    split = usage.cache_creation or {}
    write_1h = int(split.get("ephemeral_1h_input_tokens") or 0)
    write_5m = usage.cache_creation_input_tokens - write_1h
    searches = int((usage.server_tool_use or {}).get("web_search_requests") or 0)
    usd = (
        usage.input_tokens * base
        + usage.output_tokens * entry.get("output_mtok", 0.0)
        + write_5m * entry.get("cache_write_mtok", base * 1.25)
        + write_1h * entry.get("cache_write_1h_mtok", base * 2)
        + usage.cache_read_input_tokens * entry.get("cache_read_mtok", base * 0.1)
    ) / 1_000_000 + searches * entry.get("web_search_per_1k", 10.0) / 1000
    return round(usd, 9)


@lru_cache(maxsize=8)
def _read_override(path: str, mtime: float) -> dict[str, list[dict[str, Any]]]:
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PriceTableError(f"CHRONICLE_PRICES names {path}, which does not exist") from None
    except json.JSONDecodeError as exc:
        raise PriceTableError(f"CHRONICLE_PRICES file {path} is not valid JSON: {exc}") from None
    models = raw.get("models") if isinstance(raw, dict) else None
    if not isinstance(models, dict):
        raise PriceTableError(f"CHRONICLE_PRICES file {path} needs a top-level \"models\" object")
    table: dict[str, list[dict[str, Any]]] = {}
    for name, entries in models.items():
        entries = entries if isinstance(entries, list) else [entries]
        for entry in entries:
            bad = [k for k, v in entry.items() if k != "from" and not isinstance(v, (int, float))]
            if bad:
                raise PriceTableError(f"CHRONICLE_PRICES file {path}: {name}: {', '.join(bad)} must be numbers (USD per million tokens)")
        table[name] = entries
    return table


def load_override(path: str) -> dict[str, list[dict[str, Any]]]:
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        mtime = 0.0
    return _read_override(path, mtime)


# -- the bundled table ---------------------------------------------------------------------------


#: Models the bundled table does not know under any provider. Finding that out scans every model of
#: every provider (≈ 0.2 ms a call): a rebuild pricing each call of an unpriced model (a local one,
#: a scripted one) spent a fifth of its time there. A model's name matches or not whatever the date.
_UNKNOWN: set[str] = set()
#: The thread `prefetch` started, if any: the first price waits for it rather than race it.
_PREFETCH: list[threading.Thread] = []


def prefetch() -> None:
    """Import the bundled price table on a background thread, once per process.

    The first price of a process imports genai-prices (its data module and, through its updater,
    an HTTP client): ≈ 70 ms on an idle machine, paid after the first model response of every
    `chronicle run`. Started when that model call starts, the import overlaps the call, which takes
    far longer. It is the same work either way; a process that never prices stays without it."""
    if _PREFETCH or "genai_prices" in sys.modules:
        return
    thread = threading.Thread(target=_warm_table, name="chronicle-price-table", daemon=True)
    _PREFETCH.append(thread)
    thread.start()


def _warm_table() -> None:
    try:
        from genai_prices import extract_usage

        extract_usage({"model": "claude-sonnet-4-5", "usage": {"input_tokens": 0, "output_tokens": 0}}, provider_id="anthropic")
    except Exception:  # noqa: BLE001 - price() imports it again, and says what is wrong there
        pass


def _bundled_price(model: str, usage: Usage, when: datetime) -> float | None:
    if model in _UNKNOWN:
        return None
    if _PREFETCH and _PREFETCH[0].is_alive():
        _PREFETCH[0].join()
    try:
        from genai_prices import extract_usage
    except ImportError:  # pragma: no cover - a declared dependency; an override file still works
        return None
    reported = usage.model_dump(mode="json")
    context = {"service_tier": usage.service_tier} if usage.service_tier else None
    if usage.service_tier == "batch":
        context = {**(context or {}), "processing": "batch"}
    try:
        extracted = extract_usage({"model": model, "usage": reported}, provider_id="anthropic")
        if extracted.model is None:
            return _other_provider_price(model, usage, when)
        result = extracted.calc_price(genai_request_timestamp=when, price_context=context)
    except LookupError:
        return _other_provider_price(model, usage, when)
    except Exception as exc:  # noqa: BLE001 - a pricing bug must never fail a turn
        log.warning("pricing %r failed: %s", model, exc)
        return None
    return float(result.total_price)


def _other_provider_price(model: str, usage: Usage, when: datetime) -> float | None:
    """A model genai-prices knows under another provider (openai-compatible servers)."""
    from genai_prices import Usage as GUsage
    from genai_prices import calc_price

    cache_write, cache_read = usage.cache_creation_input_tokens, usage.cache_read_input_tokens
    tokens = GUsage(
        input_tokens=usage.input_tokens + cache_write + cache_read, output_tokens=usage.output_tokens,
        cache_write_tokens=cache_write, cache_read_tokens=cache_read,
    )
    try:
        result = calc_price(tokens, model_ref=model, genai_request_timestamp=when)
    except LookupError:
        _UNKNOWN.add(model)
        return None
    except Exception as exc:  # noqa: BLE001 - a pricing bug must never fail a turn
        log.warning("pricing %r failed: %s", model, exc)
        return None
    return float(result.total_price)
