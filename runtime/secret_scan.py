"""Secrets out of what is recorded: prompts, model text, tool inputs and outputs, before the event is.

Everything an agent reads or writes ends up in an append-only log that is exported, replayed and
kept for years, so a credential that reaches it once is there for good. The scan runs on content
before it becomes an event; what matches is replaced by `[REDACTED:kind]`, the count per kind is
recorded beside it (a `SecretsRedacted` event), and because the model's context is rebuilt from
the recorded events, the model only ever sees the redacted text afterwards.

Four nets, in this order:
- the values this process holds as secrets (runtime/redaction.py: secret-named environment
  variables, database URL passwords, what it gives an MCP server through its env and headers) —
  always on, even with `[privacy] redact = false`;
- well-known credential formats (cloud keys, vendor tokens, private key blocks, JWTs, URL
  passwords, bearer tokens);
- a value assigned to a secret-sounding name (`password = "…"`, `API_KEY=…`), unless it is plainly a
  setting or a mask (`{"auth": "required"}`, `"secret": "********"`: NOT_SECRETS);
- high-entropy tokens: 20+ characters of the base64/url-safe alphabet mixing upper case, lower
  case and digits, switching between them at least every third character, with a Shannon entropy
  of at least 3.5 bits per character. Pure hex (git and
  content digests, UUIDs) is left alone: an agent that cannot read a commit id is no use.

  Nor are values public by their form, because a tool's input is scanned before the tool runs and a
  cut one corrupts the user's file (a lockfile's `"integrity": "[REDACTED:…]"`), and a thinking block
  changed under its signature is refused by the API. Each form is checked exactly, on the token alone
  or with a few characters looked behind, and only once the token has already been judged random
  (ordinary text pays nothing):
  - a Subresource Integrity digest, `sha256-`/`sha384-`/`sha512-` (and npm's older `sha1-`) + the
    canonical base64 of a digest of exactly that size; a go.sum `h1:` + base64 of a SHA-256;
  - an OpenSSH public key blob (length-prefixed fields to its last byte, the first a key type);
  - an id the model APIs return: Anthropic `toolu_`, `srvtoolu_`, `msg_` (also `_bdrk_`/`_vrtx_`),
    `req_`, `msgbatch_`, `file_` + `01` + 18-28 base62; OpenAI `call_`, `chatcmpl-` + 20-40 base62
    (alone, as `name=ID`, or as the random segments of a path). Each names a message, call, request,
    batch or file; reading it takes the API key. A key glued to a prefix is no id (`-`/`_` in the
    body, or too long) and is cut, as is a random `name=` before an id;
  - a `data:…;base64,` payload: decoded, text (UTF-8, an SVG, JSON) is scanned like any text and the
    payload cut whole, with the kind found inside, when it holds anything; bytes are kept only when
    they begin as media do (PNG, JPEG, GIF, ICO, WebP, AVIF, fonts, PDF, WebAssembly, audio, video),
    other bytes (a DER key, a keystore) are cut as before.
  Still cut: capability ids (a Google Docs or unlisted YouTube playlist id, a webhook path) are
  secrets to whoever holds them and have no form that tells them from a key.

Why not `detect-secrets` (evaluated, see docs/trust.md): it installs, but its plugins cost ~0.26 ms per
line (0.5 s for a 2,000-line tool output, on every such event), report a GitHub token as its
"ghp" prefix and a private key as its header line only (so replacing what they report leaves the
secret in place), miss Anthropic keys and unquoted high-entropy tokens, flag public IPs, and have
had no release since 2024. The table below is the same idea (one detector per known format plus
entropy) scanning a whole text at once: ~1 ms for 4 KB of code, ~0.3 ms for 2 KB of prose.

`[privacy]` in the workspace's chronicle.toml configures it: `redact = false` turns the scan off
(process secrets stay masked), `patterns = {kind = "regex", …}` adds formats of your own.
Tools cannot write chronicle.toml (runtime/tools/sandbox.py); `bash` could, but only with approval.
"""

from __future__ import annotations

import base64
import binascii
import math
import os
import re
import tomllib
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache, partial
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

from pydantic import BaseModel, ConfigDict, StrictBool, ValidationError, field_validator

from .redaction import MIN_SECRET_LEN, URL_PASSWORD, held_count, is_mask, is_plain_setting, secret_values
from .settings import SettingsError

CONFIG_FILE = "chronicle.toml"
MARKER = "[REDACTED:{}]"
MARKER_RE = re.compile(r"\[REDACTED:[a-z0-9-]+\]")

#: kind -> (literal hints, pattern): the pattern runs only on a text holding one of its hints (a
#: substring test is ~100x cheaper than a regex pass); a pattern with a `secret` or `bare` group
#: replaces that group only. Hints of the case-insensitive patterns are lower case.
KNOWN_FORMATS: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (kind, hints, re.compile(rx, flags)) for kind, hints, rx, flags in (
        ("private-key", ("PRIVATE KEY",),
         r"-----BEGIN (?P<label>[A-Z0-9 ]*)PRIVATE KEY( BLOCK)?-----(?s:.*?)(?:-----END (?P=label)PRIVATE KEY( BLOCK)?-----|\Z)", 0),
        ("anthropic-key", ("sk-ant-",), r"sk-ant-[A-Za-z0-9_-]{8,}", 0),
        ("openai-key", ("sk-",), r"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}", 0),
        ("aws-access-key", ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"), r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b", 0),
        ("github-token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
         r"(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})", 0),
        ("gitlab-token", ("glpat-",), r"glpat-[A-Za-z0-9_-]{20,}", 0),
        ("slack-token", ("xox",), r"xox[abposr]-[A-Za-z0-9-]{10,}", 0),
        ("stripe-key", ("_live_", "_test_"), r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}", 0),
        ("google-api-key", ("AIza",), r"AIza[0-9A-Za-z_-]{35}", 0),
        ("npm-token", ("npm_",), r"npm_[A-Za-z0-9]{36}\b", 0),
        ("pypi-token", ("pypi-",), r"pypi-AgE[A-Za-z0-9_-]{50,}", 0),
        ("sendgrid-key", ("SG.",), r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}", 0),
        ("jwt", ("eyJ",), r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", 0),
        ("url-password", ("://",), URL_PASSWORD.pattern.replace("(?P<password>", "(?P<secret>"), re.IGNORECASE),
        ("bearer-token", ("bearer",), r"(?i:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/=-]{12,})", 0),
        # A value given to a secret-sounding name: quoted, or a bare token with a letter and a digit or
        # symbol in it (so `password = user_password` and `max_tokens=1_000` stay: they are code). A `pwd`
        # name given an absolute path is the shell's working directory (`PWD=/home/x`, `OLDPWD`), not a password.
        # `pass`, `passphrase` and `auth` count only as a whole name or its last part after a separator (`pass:`,
        # `DB_PASS=`, `smtp.auth =`): inside a word they are `bypass`, `compass`, `author`. A NUL ends a bare value
        # as whitespace does: `/proc/PID/environ` separates its variables with it.
        ("assigned-secret", ("pass", "pwd", "secret", "token", "key", "credential", "auth"),
         r"(?:(?i:passw(?:or)?d|pwd(?![A-Za-z0-9_.-]*[\"']?[ \t]*[:=][ \t]*[\"']?/)|secret|token|key|credential)[A-Za-z0-9_.-]*"
         r"|(?<![A-Za-z0-9])(?i:pass(?:phrase)?|auth)(?![A-Za-z0-9_.-]))"
         r"[\"']?[ \t]*[:=][ \t]*"
         r"(?:(?P<q>[\"'])(?P<secret>[^\"'\s$%{}()<>]{8,})(?P=q)"
         r"|(?P<bare>(?=[^\s\x00\"'$%{}()<>,;]*[A-Za-z])(?=[^\s\x00\"'$%{}()<>,;]*[0-9/+!@#^&*~])[^\s\x00\"'$%{}()<>,;\[\]]{8,}"
         r"(?=[\s\x00,;\"']|\Z)))", 0),
    )
)
#: kind -> what its matched value may be and still be no secret, kept as written (docs/trust.md): a secret-sounding
#: name given a settings word or a mask (`{"auth": "required"}`, `"secret": "********"`), a URL whose password is
#: already masked (`postgresql://app:***@db`). Other kinds, and configured patterns, cut whatever they match.
NOT_SECRETS: dict[str, Callable[[str], bool]] = {"assigned-secret": is_plain_setting, "url-password": is_mask}
MIN_TOKEN = 20
#: A maximal run: scanning left to right, a match always starts where a run starts (no lookarounds: 3x faster).
TOKEN = re.compile(r"[A-Za-z0-9+/=_-]{20,}")
HEX_LIKE = re.compile(r"[0-9a-fA-F-]+")
MIN_ENTROPY = 3.5
MIN_SWITCHES = 0.35


def entropy(token: str) -> float:
    counts = Counter(token)
    return -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())


def _class(c: str) -> int:
    return 0 if c.islower() else 1 if c.isupper() else 2 if c.isdigit() else 3


def high_entropy(token: str) -> bool:
    """Random-looking: upper, lower and digits, switching between them often (CamelCase names and
    words with a version number do not), and enough entropy. A path is judged per segment."""
    if "/" in token:
        return any(high_entropy(part) for part in token.split("/") if len(part) >= MIN_TOKEN)
    if HEX_LIKE.fullmatch(token):
        return False
    classes = [_class(c) for c in token if c.isalnum()]
    if not {0, 1, 2} <= set(classes):
        return False
    switches = sum(a != b for a, b in zip(classes, classes[1:], strict=False)) / (len(classes) - 1)
    return switches >= MIN_SWITCHES and entropy(token) >= MIN_ENTROPY


class PrivacyValues(BaseModel):
    """`[privacy]` of chronicle.toml."""

    model_config = ConfigDict(extra="forbid")
    redact: StrictBool = True
    patterns: dict[str, str] = {}

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, value: dict[str, str]) -> dict[str, str]:
        for kind, rx in value.items():
            if not re.fullmatch(r"[a-z0-9-]+", kind):
                raise ValueError(f"pattern name {kind!r}: use lower-case letters, digits and -")
            try:
                re.compile(rx)
            except re.error as exc:
                raise ValueError(f"pattern {kind!r} is not a regular expression: {exc}") from None
        return value


class PrivacyError(SettingsError):
    """`[privacy]` cannot be used; the message names the file and the setting."""


@dataclass(frozen=True)
class Scan:
    """What a scan found: the redacted value and how many of each kind it replaced."""

    value: Any
    counts: dict[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.counts)


@dataclass(frozen=True)
class SecretScanner:
    enabled: bool = True
    #: Configured formats: (kind, hints, pattern), hints () meaning always run.
    patterns: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = ()
    #: The workspace's stored credentials (runtime/credentials.py), longest first: a tool that prints one, or a
    #: model that repeats it, must not put it in the log the credential store exists to keep it out of.
    credentials: tuple[str, ...] = ()

    @cached_property
    def _hints(self) -> frozenset[str]:
        return frozenset(h for _, hints, _ in (*self.patterns, *KNOWN_FORMATS) for h in hints)

    def text(self, text: str, environ: Mapping[str, str] | None = None) -> Scan:
        counts: Counter[str] = Counter()
        if not text:
            return Scan(text)
        for secret in _process_secrets(os.environ if environ is None else environ):
            if secret in text:
                counts["environment"] += text.count(secret)
                text = text.replace(secret, MARKER.format("environment"))
        for secret in self.credentials:  # cut whatever [privacy] says: the user gave it to be kept out
            if secret in text:
                counts["credential"] += text.count(secret)
                text = text.replace(secret, MARKER.format("credential"))
        if self.enabled:
            lower = text.lower()
            # Each distinct hint is looked for once, not once per pattern that names it (16 patterns
            # share 27 hints: a generator per pattern was half of a short text's scan).
            present = {h for h in self._hints if h in (lower if h.islower() else text)}
            for kind, hints, pattern in (*self.patterns, *KNOWN_FORMATS):
                if hints and present.isdisjoint(hints):
                    continue
                text = pattern.sub(lambda m, kind=kind: _replace(m, kind, counts), text)  # type: ignore[misc]
            inner = partial(self.text, environ=environ)
            text = TOKEN.sub(lambda m: _entropy_replace(m, counts, inner), text)
        return Scan(text, dict(counts))

    def value(self, value: Any, environ: Mapping[str, str] | None = None) -> Scan:
        """Every string inside a JSON-like value (a tool's input), keys kept."""
        counts: Counter[str] = Counter()

        def walk(v: Any) -> Any:
            if isinstance(v, str):
                found = self.text(v, environ)
                counts.update(found.counts)
                return found.value
            if isinstance(v, dict):
                return {k: walk(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [walk(x) for x in v]
            return v

        result = walk(value)
        return Scan(result if counts else value, dict(counts))


_SECRETS_CACHE: list[tuple[dict[Any, Any], int, list[str]]] = []


def _process_secrets(environ: Mapping[str, str]) -> list[str]:
    """secret_values, computed once per distinct environment (it runs a regex over every variable) and
    set of held values (an MCP server's env and headers, redaction.hold_secrets).

    The environment is compared as a plain dict copy: hashing `os.environ.items()` decoded every
    name and value on each call, three times per model step. `os.environ` is copied from its
    raw bytes (`_data`), which needs no decoding; a change to any variable still misses."""
    raw = getattr(environ, "_data", None) if environ is os.environ else None
    snapshot = dict(raw if isinstance(raw, dict) else environ)
    held = held_count()
    for seen, seen_held, found in _SECRETS_CACHE:
        if seen_held == held and seen == snapshot:
            return found
    if len(_SECRETS_CACHE) >= 16:
        _SECRETS_CACHE.pop(0)
    found = secret_values(environ)
    _SECRETS_CACHE.append((snapshot, held, found))
    return found


def _replace(match: re.Match[str], kind: str, counts: Counter[str]) -> str:
    groups = match.re.groupindex
    for name in ("secret", "bare"):
        if name in groups and match.group(name) is not None:
            if MARKER_RE.fullmatch(match.group(name)) or (kind in NOT_SECRETS and NOT_SECRETS[kind](match.group(name))):
                return match.group(0)
            counts[kind] += 1
            start, end = (i - match.start(0) for i in match.span(name))
            return match.group(0)[:start] + MARKER.format(kind) + match.group(0)[end:]
    if MARKER_RE.search(match.group(0)):
        return match.group(0)
    counts[kind] += 1
    return MARKER.format(kind)


def _entropy_replace(match: re.Match[str], counts: Counter[str], inner: Callable[[str], Scan]) -> str:
    """A high-entropy token cut, unless its form says it is public (module docstring); `inner` scans a data URL's text."""
    token = match.group(0)
    if not high_entropy(token):
        return token
    data = _data_url_payload(token, match.string, match.start())
    if data is not None:
        if isinstance(data, str):  # text: what it holds is judged as any text is
            found = inner(data)
            if not found.counts:
                return token
            counts.update(found.counts)
            return MARKER.format(next(iter(found.counts)))
        if data.startswith(MEDIA_MAGIC) or data[8:12] in (b"WEBP", b"WAVE") or data[4:8] == b"ftyp":
            return token
    elif _public(token, match.string, match.start()):
        return token
    counts["high-entropy"] += 1
    return MARKER.format("high-entropy")


#: Subresource Integrity (HTML `integrity=`, npm/yarn/pnpm lockfiles, Nix): the algorithm, then the standard base64
#: of a digest of exactly that algorithm's size. sha1 is npm's older lockfiles' form, not SRI's, but the same shape.
SRI = re.compile(r"sha(1|256|384|512)-([A-Za-z0-9+/]+={0,2})")
SRI_BYTES = {"1": 20, "256": 32, "384": 48, "512": 64}
#: Ids the model APIs an agent talks to return, by prefix and exact shape: Anthropic's (`01` then base62, directly or
#: through Bedrock/Vertex) and OpenAI chat's. Each names a message, tool call, request, batch or file; none is a
#: credential (reading what it names takes the API key). The body is base62 only, of the ids' own length, so a key
#: glued to a prefix (`toolu_sk-proj-…`, `call_ghp_…`, `toolu_01` + a 40-character AWS secret) is no id and is cut.
PUBLIC_ID = re.compile(r"(?:(?:srv)?toolu_(?:bdrk_|vrtx_)?|msg_(?:bdrk_|vrtx_)?|req_|msgbatch_|file_)01[A-Za-z0-9]{18,28}"
                       r"|(?:call_|chatcmpl-)[A-Za-z0-9]{20,40}")
#: `name=` before a value in the same token (`list=…`, `tool_use_id=toolu_…`): `=` is in the token alphabet.
NAMED = re.compile(r"([A-Za-z][A-Za-z0-9_-]{0,63})=([^=].*)", re.DOTALL)
#: An OpenSSH public key blob (`ssh-ed25519 AAAAC3Nz…`, authorized_keys, known_hosts): public by definition.
SSH_KEY_TYPES = frozenset({b"ssh-rsa", b"ssh-dss", b"ssh-ed25519", b"ssh-ed448", b"ecdsa-sha2-nistp256", b"ecdsa-sha2-nistp384",
                           b"ecdsa-sha2-nistp521", b"sk-ssh-ed25519@openssh.com", b"sk-ecdsa-sha2-nistp256@openssh.com"})
#: `data:[type][;param=value]*;base64,` ending where the payload token starts.
DATA_URL = re.compile(r"data:(?:[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+)?(?:;[A-Za-z0-9!#$&^_.+-]+=[^;,\s\"'()<>]*)*;base64,",
                      re.IGNORECASE)
#: The first bytes of media an HTML/CSS/JS file embeds (images, fonts, audio, video, PDF, WebAssembly); RIFF-based
#: (WebP, WAV) and ISO media (MP4, MOV, AVIF, HEIC) are told by their bytes 8-12 and 4-8.
MEDIA_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"\x00\x00\x01\x00", b"wOFF", b"wOF2",
               b"\x00\x01\x00\x00", b"OTTO", b"true", b"%PDF-", b"\x00asm", b"ID3", b"OggS", b"fLaC", b"\x1aE\xdf\xa3")


def _public(token: str, text: str, start: int) -> bool:
    """A token of a form that is public by what it is: an SRI digest, an API id (alone, as `name=ID`, or as the
    high-entropy segments of a path), a go.sum `h1:` hash, an SSH public key."""
    if _public_value(token):
        return True
    named = NAMED.fullmatch(token) if "=" in token.rstrip("=") else None
    if named and not high_entropy(named.group(1)) and _public_value(named.group(2)):
        return True
    if "/" in token and all(PUBLIC_ID.fullmatch(part) for part in token.split("/") if len(part) >= MIN_TOKEN and high_entropy(part)):
        return True
    # go.sum: `module version h1:` + base64 of a SHA-256 (`:` ends the token, so the prefix is looked behind for)
    go_sum = start >= 3 and text.startswith("h1:", start - 3) and (start == 3 or not text[start - 4].isalnum())
    return go_sum and _b64_bytes(token) == 32


def _public_value(token: str) -> bool:
    if PUBLIC_ID.fullmatch(token):
        return True
    sri = SRI.fullmatch(token)
    if sri:
        return _b64_bytes(sri.group(2)) == SRI_BYTES[sri.group(1)]
    return token.startswith("AAAA") and _ssh_public_key(token)


def _b64_bytes(value: str) -> int:
    """How many bytes `value` is the canonical, padded standard base64 of; -1 when it is not."""
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return -1
    return len(raw) if base64.b64encode(raw).decode() == value else -1


def _ssh_public_key(token: str) -> bool:
    """The blob is length-prefixed strings to its last byte, the first a public key type."""
    try:
        blob = base64.b64decode(token, validate=True)
    except (binascii.Error, ValueError):
        return False
    at, first = 0, None
    while at < len(blob):
        size = int.from_bytes(blob[at:at + 4], "big")
        if at + 4 + size > len(blob):
            return False
        first = blob[at + 4:at + 4 + size] if first is None else first
        at += 4 + size
    return first in SSH_KEY_TYPES


def _data_url_payload(token: str, text: str, start: int) -> str | bytes | None:
    """The decoded payload when the token is a `data:…;base64,` URL's: text (UTF-8) as str, anything else as bytes.

    None when no data URL precedes it or it is not base64 (then it is judged as any token). A payload cut short
    (a tool that shows the first N characters) is decoded as far as it goes."""
    at = text.rfind("data:", max(0, start - 256), start)
    if at < 0 or not DATA_URL.fullmatch(text, at, start):
        return None
    body = token.rstrip("=")
    if "-" in body or "_" in body:
        body = body.translate(URLSAFE)
    body = body[:len(body) - 1] if len(body) % 4 == 1 else body
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data" and exc.start >= len(raw) - 3:
            return raw[:exc.start].decode("utf-8")
        return raw


URLSAFE = str.maketrans("-_", "+/")


def load_privacy(workspace: Path | None) -> PrivacyValues:
    if workspace is None:
        return PrivacyValues()
    path = workspace / CONFIG_FILE
    try:
        stat = path.stat()
    except OSError:
        return PrivacyValues()
    return _load(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=32)
def _load(path: str, mtime_ns: int, size: int) -> PrivacyValues:
    try:
        table = tomllib.loads(Path(path).read_text(encoding="utf-8")).get("privacy") or {}
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PrivacyError(f"{path} cannot be read for [privacy]: {exc}; fix it or remove it") from None
    if not isinstance(table, dict):
        raise PrivacyError(f"{path}: [privacy] must be a table, like [privacy] redact = true")
    try:
        return PrivacyValues.model_validate(table)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PrivacyError(f"{path}: [privacy] {where}: {first['msg'].removeprefix('Value error, ')}") from None


def scanner_for(workspace: Path | str | None) -> SecretScanner:
    """The workspace's scanner: chronicle.toml's [privacy], re-read when the file changes.

    Asked for every model response and tool output, so the question per call is one `stat` of the
    file (os.stat on a string: pathlib and a fresh PrivacyValues per call were most of its cost)."""
    path = os.path.join(workspace, CONFIG_FILE) if workspace else ""
    try:
        stat = os.stat(path) if path else None
    except OSError:
        stat = None
    scanner = _scanner_of(path, stat.st_mtime_ns, stat.st_size) if stat else _scanner_of("", 0, 0)
    from .credentials import CREDENTIALS_FILE

    kept = os.path.join(workspace, CREDENTIALS_FILE) if workspace else ""
    try:
        held = os.stat(kept) if kept else None
    except OSError:
        return scanner
    return replace(scanner, credentials=_credentials_of(kept, held.st_mtime_ns, held.st_size)) if held else scanner


class NotesRedactions(Protocol):
    def note_redactions(self, where: str, counts: dict[str, int], now: Any) -> None: ...


def scanned_text(aggregate: NotesRedactions, where: str, text: str, workspace: Path | str | None, now: Any) -> str:
    """Free text someone typed (a steering message, a denial's reason, a task posted on a board), as it may be recorded.

    The one path for such text: scanned with the workspace's scanner, and the count noted on the aggregate that
    records it, in its transaction. A command that records a new field of free text calls this, as steering does;
    the text is shown back to the model and in history/why/audit, so what is not scanned here is stored for good."""
    found = scanner_for(workspace).text(text)
    aggregate.note_redactions(where, found.counts, now)
    return str(found.value)


@lru_cache(maxsize=32)
def _credentials_of(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """The credential values stored at `path` long enough to cut safely (a short one would cut ordinary words)."""
    from .credentials import stored_values

    return tuple(sorted((v for v in stored_values(path) if len(v) >= MIN_SECRET_LEN), key=len, reverse=True))


@lru_cache(maxsize=32)
def _scanner_of(path: str, mtime_ns: int, size: int) -> SecretScanner:
    privacy = _load(path, mtime_ns, size) if path else PrivacyValues()
    return _scanner(privacy.redact, tuple(sorted(privacy.patterns.items())))


@lru_cache(maxsize=32)
def _scanner(enabled: bool, patterns: tuple[tuple[str, str], ...]) -> SecretScanner:
    return SecretScanner(enabled, tuple((kind, (), re.compile(rx)) for kind, rx in patterns))


#: Which field of a block holds what the model wrote: scanned. Signatures, ids and encrypted
#: `redacted_thinking` data are the API's, not the model's text, and must go back unchanged.
SCANNED_FIELDS = {"text": "text", "thinking": "thinking", "tool_use": "input"}


def scan_response(response: Any, scanner: SecretScanner) -> tuple[Any, dict[str, int]]:
    """A ModelResponse with its text, thinking, tool inputs and error message scanned, and what was cut.

    A thinking block that held a secret keeps its signature over the original text; Anthropic
    may refuse it when it is sent back (docs/trust.md: the price of never storing the secret)."""
    counts: Counter[str] = Counter()
    blocks = []
    for block in response.content:
        name = SCANNED_FIELDS.get(getattr(block, "type", ""))
        value = getattr(block, name, None) if name else None
        if value:
            found = scanner.value(value)
            if found:
                counts.update(found.counts)
                block = block.model_copy(update={name: found.value})
        blocks.append(block)
    update: dict[str, Any] = {"content": blocks} if counts else {}
    if response.raw:
        found = scanner.value(response.raw)
        if found:
            counts.update(found.counts)
            update["raw"] = found.value
    if getattr(response, "error", None) is not None:  # a provider's error may repeat what it was sent, a key included
        found = scanner.value(response.error.message)
        if found:
            counts.update(found.counts)
            update["error"] = response.error.model_copy(update={"message": found.value})
    return (response.model_copy(update=update) if update else response), dict(counts)
