"""Secrets out of text before it is stored, logged or shown: by value, by name and by shape.

Matching only the exact ANTHROPIC_API_KEY missed every other credential a process holds, so
three nets are cast: the values of environment variables whose names say they are secret
(`*_KEY`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*PASSWD*`, `*PASSPHRASE*`, `*CREDENTIAL*`, `*_PASS`, `*_AUTH`;
not `*_FILE`, a path) and the values the process gives an MCP server as secrets (`hold_secrets`), the passwords of every
database URL in the environment (decoded and as written), and anything shaped like a credential
wherever it came from (`scheme://user:password@host`, `sk-ant-…`, `Bearer …`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import unquote

MASK = "***"
#: `PASS`/`AUTH` only as a whole name or its last part (DB_PASS, SMTP_AUTH): SSH_AUTH_SOCK and GIT_ASKPASS are not secrets.
SECRET_NAME = re.compile(r"(^|_)(API)?KEYS?($|_)|TOKEN|SECRET|PASSW(OR)?D|PASSPHRASE|CREDENTIAL|(^|_)(PASS|AUTH)$", re.IGNORECASE)
#: The runtime's own credentials: never handed to a tool, whatever the configuration says.
RUNTIME_SECRETS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CHRONICLE_DB", "CHRONICLE_TEST_PG", "DATABASE_URL")
#: A URL's userinfo password: everything between "user:" and the LAST "@" before the host, so an
#: unencoded "/", "#", "?" or "@" in the password does not end the match early.
URL_PASSWORD = re.compile(r"(?P<head>\b[a-z][a-z0-9+.-]*://[^:/?#@\s]*:)(?P<password>[^\s]*)(?P<tail>@[^@\s]*)", re.IGNORECASE)
SHAPES = (
    re.compile(r"sk-ant-[A-Za-z0-9_-]{8,}"),
    re.compile(r"(?<=Bearer )[A-Za-z0-9._~+/=-]{12,}"),
)
MIN_SECRET_LEN = 6
#: What a secret-named setting holds when it holds no secret: a mode or scheme (`{"auth": "required"}`,
#: `"password_policy": "optional"`, `token_type: Bearer`). Redacting such a value loses it from the audit log for
#: good and protects nothing, so the set is closed and small: a word not in it, or spelled otherwise, is cut.
SETTING_WORDS = frozenset({
    "required", "optional", "mandatory", "disabled", "enabled", "none", "null", "bearer", "basic", "digest",
    "true", "false", "redacted", "masked", "hidden", "unset",
})
#: A word as written in lower case, Capitalised or UPPER case, alone or in square brackets (`[REDACTED]`);
#: `rEquired` or `required1` is not a setting and is cut.
_SETTING_FORMS = frozenset(
    form for word in SETTING_WORDS for cased in (word, word.capitalize(), word.upper()) for form in (cased, f"[{cased}]"))
#: A value already masked by whoever printed it (`********`, `•••••••`, `xxxxxxxx`): nothing is left to hide.
MASK_ONLY = re.compile(r"[*•●xX#]+")


def is_secret_name(name: str) -> bool:
    """Named as a secret: its whole value is hidden. A database URL (CHRONICLE_DB) loses only its password. A
    `*_FILE` variable (CHRONICLE_CIPHER_KEY_FILE, the Docker secrets convention) names where a secret is kept, not
    the secret: hiding that path made "cannot read … ***" impossible to act on."""
    return bool(SECRET_NAME.search(name)) and not name.upper().endswith("_FILE")


def is_mask(value: str) -> bool:
    """Made only of mask characters: printed by something that already hid the secret."""
    return bool(MASK_ONLY.fullmatch(value))


def is_plain_setting(value: str) -> bool:
    """A secret-named value that is plainly no secret: a settings word (SETTING_WORDS) or a mask. Conservative on
    purpose: anything else, a word outside the set included, is treated as a secret."""
    return value in _SETTING_FORMS or is_mask(value)


#: Values this process hands on as secrets though none of its secret-named variables holds them: what an MCP server
#: is given through its `env` or `headers` (runtime/tools/mcp_config.py), from a variable of any name or written in
#: the file. Kept in this process's memory alone, for as long as it runs: never written, logged or recorded.
_HELD: dict[str, None] = {}


def hold_secrets(values: Iterable[str]) -> None:
    """Cut these wherever they appear from now on, as a secret-named variable's value is (a settings word, a mask or
    a value too short to cut safely aside)."""
    for value in values:
        if len(value) >= MIN_SECRET_LEN and not is_plain_setting(value):
            _HELD.setdefault(value)


def held_count() -> int:
    """How many values `hold_secrets` was given: it only grows, so a cache of `secret_values` keys on it."""
    return len(_HELD)


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Every value worth hiding that this process holds, longest first (so no part is left over): its environment's
    and those it hands on to MCP servers (`hold_secrets`)."""
    env = os.environ if environ is None else environ
    values: set[str] = set(_HELD)
    for name, value in env.items():
        # `SMTP_AUTH=disabled` holds a setting: cutting it would cut the word from every text.
        if is_secret_name(name) and len(value) >= MIN_SECRET_LEN and not is_plain_setting(value):
            values.add(value)
        for match in URL_PASSWORD.finditer(value):
            password = match.group("password")
            values.update(p for p in (password, unquote(password)) if len(p) >= 3 and not is_mask(p))
    return sorted(values, key=len, reverse=True)


def redact_secrets(text: str, extra: tuple[str | None, ...] = (), environ: Mapping[str, str] | None = None) -> str:
    if not text:
        return text
    for secret in (*(s for s in extra if s and len(s) >= MIN_SECRET_LEN), *secret_values(environ)):
        if secret in text:
            text = text.replace(secret, MASK)
    text = URL_PASSWORD.sub(lambda m: f"{m.group('head')}{MASK}{m.group('tail')}" if m.group("password") != MASK else m.group(0), text)
    for shape in SHAPES:
        text = shape.sub(MASK, text)
    return text
