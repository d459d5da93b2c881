"""What the secret scan cuts out, and what it must leave alone for an agent to still work (issue 13)."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from chronicle.domain.content import ModelResponse
from chronicle.runtime.secret_scan import PrivacyError, SecretScanner, high_entropy, load_privacy, scan_response, scanner_for

SCAN = SecretScanner()

# Assembled from parts so that no scanner run over this repository trips over the file itself.
FOUND = [
    ("aws-access-key", "export AWS_ACCESS_KEY_ID=" + "AKIA" + "QX7RZ2MPL4KD9WNT", "AKIAQX7RZ2MPL4KD9WNT"),
    ("github-token", "token ghp_" + "Zr8Kq2Lm9Nx4Vb7Tc1Hd6Jf3Gs5Pw0Ya8Eu2 ok", "Zr8Kq2Lm9Nx4"),
    ("github-token", "github_pat_" + "11ABCDEFG0123456789_abcdefghijKLMNOP", "11ABCDEFG0123456789"),
    ("anthropic-key", "key sk-ant-" + "api03-Xw9Lq2Zr8Km4Nv7Tb1Hc6Jd3Gf5Ps0Ya", "Xw9Lq2Zr8Km4"),
    ("openai-key", "OPENAI sk-proj-" + "abcdefghijklmnopqrstuvwx1234", "abcdefghijklmnopqrstuvwx1234"),
    ("slack-token", "xoxb-" + "123456789012-abcdefghijkl", "123456789012-abcdefghijkl"),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "dozjgNryP4J3"),
    ("private-key", "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEowIBAAKCAQEAsecretbody\n-----END RSA PRIVATE KEY-----", "secretbody"),
    ("url-password", "postgresql://app:" + "hunter2x@db:5432/x", "hunter2x"),
    ("bearer-token", "Authorization: Bearer " + "abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnop"),
    ("assigned-secret", 'password = "' + 'correct-horse-battery"', "correct-horse"),
    ("assigned-secret", "DB_PASSWORD=" + "s3cr3t-Value!", "s3cr3t-Value"),
    ("assigned-secret", "DB_PWD=" + "Hunter2xyz9", "Hunter2xyz9"),
    # `pass`, `passphrase` and `auth` as a whole name or its last part: a tool's JSON, a ToolError, an env dump.
    ("assigned-secret", '{"pass": "' + 'CorrectHorse9"}', "CorrectHorse9"),
    ("assigned-secret", "login failed, pass: " + "hunter2hunter2", "hunter2hunter2"),
    ("assigned-secret", "OperationalError: DB_PASS=" + "PlainPass-4455 refused", "PlainPass-4455"),
    ("assigned-secret", "SMTP_AUTH=" + "Zx9-mail-Key\nHOME=/root", "Zx9-mail-Key"),
    ("assigned-secret", "key_passphrase = '" + "long-Passphrase'", "long-Passphrase"),
    ("assigned-secret", "HOME=/root\x00DB_PASS=" + "PlainPass-4455\x00LANG=C", "PlainPass-4455"),  # /proc/PID/environ
    ("high-entropy", "the session cookie is " + "Qm7Zx2Rt9Lp4Vw8Ks1Nd6Hf3Jb5Gc0Ty today", "Qm7Zx2Rt9Lp4"),
]


@pytest.mark.parametrize(("kind", "text", "secret"), FOUND, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(FOUND)])
def test_each_known_format_is_replaced_by_its_kind_and_counted(kind, text, secret):
    found = SCAN.text(text, environ={})
    assert secret not in found.value
    assert f"[REDACTED:{kind}]" in found.value
    assert found.counts == {kind: 1}


KEPT = [
    "commit 9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a and session 3f2a1b0c-9d8e-7f6a-5b4c-3d2e1f0a9b8c",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "/usr/lib/python3/site-packages/ChronicleStoreApplicationRecorder2024/IndexPage.tsx",
    "password = user_password; key = Ed25519PrivateKey.generate(); secret: os.environ['X']",
    "max_tokens=8192 input_tokens=1_000_000 token_count: 123456789",
    "def test_a_store_written_without_a_key_refuses_one(sqlite_url, workspace, tmp_path):",
    "GITHUB_TOKEN=$GITHUB_TOKEN and [REDACTED:github-token] stays one marker",
    "PWD=/tmp/work/ws1\nOLDPWD=/home/user/project2",  # `env` in bash: the working directory, not a password
    # `pass` and `auth` inside a word, or given no secret-like value, are code and prose.
    "bypass = True; compass: north; trespass=Forbidden2; x.bypass = Secret123",
    "author: Jane99-Doe; OAuth: Abc123456; auth: true; if ok: pass",
    "SSH_AUTH_SOCK=/tmp/ssh-XYZ/agent.123\x00GIT_ASKPASS=/usr/lib/git-core/git-gui--askpass",
]


@pytest.mark.parametrize("text", KEPT)
def test_code_digests_ids_and_paths_are_left_alone(text):
    found = SCAN.text(text, environ={})
    assert found.value == text and not found.counts


def test_values_the_process_holds_as_secrets_are_cut_even_with_the_scan_off():
    off = SecretScanner(enabled=False)
    env = {"MY_SERVICE_TOKEN": "svc-Tq4Wm8Rz2Xk6"}
    found = off.text("svc-Tq4Wm8Rz2Xk6 and ghp_" + "Zr8Kq2Lm9Nx4Vb7Tc1Hd6Jf3Gs5Pw0Ya8Eu2", environ=env)
    assert found.value.startswith("[REDACTED:environment] and ghp_") and found.counts == {"environment": 1}


def test_a_tool_input_is_scanned_string_by_string_keys_kept():
    found = SCAN.value({"command": "curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwxyz' x", "n": 3, "args": ["AKIA" + "QX7RZ2MPL4KD9WNT"]},
                       environ={})
    assert found.value == {"command": "curl -H 'Authorization: Bearer [REDACTED:bearer-token]' x", "n": 3,
                           "args": ["[REDACTED:aws-access-key]"]}
    assert found.counts == {"bearer-token": 1, "aws-access-key": 1}


def test_a_response_keeps_its_signatures_and_ids_and_loses_its_secrets():
    response = ModelResponse.model_validate({"content": [
        {"type": "thinking", "thinking": "the key is AKIA" + "QX7RZ2MPL4KD9WNT", "signature": "Zm9vYmFyQmF6cXV4MTIzNDU2Nzg5MA=="},
        {"type": "text", "text": "done"},
        {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "bash", "input": {"command": "echo AKIA" + "QX7RZ2MPL4KD9WNT"}},
    ], "stop_reason": "tool_use"})
    scanned, counts = scan_response(response, SCAN)
    dumped = scanned.model_dump(mode="json")
    assert "QX7RZ2MPL4KD9WNT" not in str(dumped) and counts == {"aws-access-key": 2}
    assert dumped["content"][0]["signature"] == "Zm9vYmFyQmF6cXV4MTIzNDU2Nzg5MA=="
    assert dumped["content"][2]["id"] == "toolu_01A09q90qw90lq917835lq9"
    assert scan_response(scanned, SCAN)[0] is scanned  # nothing left: the same object back


def test_privacy_table_is_checked_with_one_line_naming_the_setting(tmp_path):
    (tmp_path / "chronicle.toml").write_text('[privacy]\nredact = "no"\n', encoding="utf-8")
    with pytest.raises(PrivacyError, match=r"\[privacy\] redact: Input should be a valid boolean"):
        load_privacy(tmp_path)
    (tmp_path / "chronicle.toml").write_text('[privacy]\npatterns = { bad = "(" }\n', encoding="utf-8")
    with pytest.raises(PrivacyError, match="pattern 'bad' is not a regular expression"):
        load_privacy(tmp_path)
    (tmp_path / "chronicle.toml").write_text('[privacy]\nredact = false\npatterns = { ticket = "TCK-[0-9]+" }\n', encoding="utf-8")
    scanner = scanner_for(tmp_path)
    assert not scanner.enabled and scanner_for(tmp_path / "elsewhere").enabled


def test_a_secret_set_in_the_process_environment_after_earlier_scans_is_cut(monkeypatch):
    # The scanner remembers what it found in the environment; a variable set or changed
    # later must still be seen (the remembered copy is compared, not trusted).
    scanner = SecretScanner()
    monkeypatch.setenv("MY_SERVICE_TOKEN", "svc-" + "Hb7Qx2Lm9Wd4")
    assert "Hb7Qx2Lm9Wd4" not in scanner.text("token svc-Hb7Qx2Lm9Wd4 here").value
    monkeypatch.setenv("MY_SERVICE_TOKEN", "svc-" + "Zr5Kt8Np3Vc6")
    found = scanner.text("old svc-Hb7Qx2Lm9Wd4 new svc-Zr5Kt8Np3Vc6")
    assert "Zr5Kt8Np3Vc6" not in found.value and found.counts.get("environment") == 1


def test_the_workspace_scanner_follows_its_file_as_it_is_written_changed_and_removed(tmp_path):
    """Asked for every response and tool output: a cached answer must still follow the file."""
    secret = "EMP-123456"
    assert scanner_for(str(tmp_path)).text(f"id {secret}").value == f"id {secret}"  # no file: the built-in formats only
    config = tmp_path / "chronicle.toml"
    config.write_text('[privacy]\npatterns = { employee = "EMP-[0-9]{6}" }\n', encoding="utf-8")
    assert secret not in scanner_for(str(tmp_path)).text(f"id {secret}").value
    config.write_text("[privacy]\nredact = false\n", encoding="utf-8")  # a different size: read again
    assert not scanner_for(tmp_path).enabled
    config.write_text('[privacy]\nredact = "no"\n', encoding="utf-8")
    with pytest.raises(PrivacyError):  # a broken edit is refused on every call, never served from the cache
        scanner_for(tmp_path)
    with pytest.raises(PrivacyError):
        scanner_for(tmp_path)
    config.unlink()
    assert scanner_for(tmp_path).enabled and scanner_for(None).enabled


SEPARATED_NAMES = st.sampled_from(["pass", "PASS", "passphrase", "auth", "AUTH"]).flatmap(
    lambda last: st.sampled_from(["", "DB_", "smtp.", "key-", "MY_APP_", "--"]).map(lambda head: head + last))
#: A value the rule takes: a letter and a digit or symbol, 8+ characters, nothing that ends a value.
VALUES = st.builds(lambda a, b, rest: a + b + rest, st.sampled_from("abcXYZ"), st.sampled_from("0123456789!@#"),
                   st.text(alphabet="abcdefghijkLMNOPQ0123456789-_!", min_size=6, max_size=30))


@settings(max_examples=200, deadline=None)
@given(name=SEPARATED_NAMES, value=VALUES, quote=st.sampled_from(["", '"', "'"]), sep=st.sampled_from(["=", ": ", " = ", ":"]),
       after=st.sampled_from(["", "\n", " next", "\x00NEXT=1", ","]))
def test_any_value_given_to_a_pass_or_auth_name_is_cut(name, value, quote, sep, after):
    text = f"{name}{sep}{quote}{value}{quote}{after}"
    found = SCAN.text(text, environ={})
    assert value not in found.value and found.counts.get("assigned-secret") == 1, text


@settings(max_examples=200, deadline=None)
@given(head=st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC0123456789", min_size=1, max_size=8),
       last=st.sampled_from(["pass", "PASS", "passphrase", "auth", "Auth"]), value=VALUES, sep=st.sampled_from(["=", ": ", " = "]))
def test_pass_or_auth_inside_a_word_is_no_secret_name(head, last, value, sep):
    """`bypass`, `compass`, `OAuth`: only the name's last part after a separator counts (a name holding one of
    the older names, `passwdpass`, is theirs to cut, and the value holds no known format)."""
    assume(not re.search("passw|pwd|secret|token|key|credential", head + last, re.IGNORECASE))
    text = f"{head}{last}{sep}{value}"
    assert SCAN.text(text, environ={}).counts.get("assigned-secret") is None, text


@settings(max_examples=200, deadline=None)
@given(name=SEPARATED_NAMES, value=st.one_of(st.from_regex(r"[a-z_]{8,20}", fullmatch=True), st.from_regex(r"[0-9_]{1,12}", fullmatch=True),
                                             st.sampled_from(["True", "false", "None", "$DB_PASS", "${SECRET}", "os.environ['X']"])))
def test_a_pass_or_auth_name_given_code_keeps_it(name, value):
    """The rule's value requirements hold for the new names: a bare word, a number, a variable is code."""
    text = f"{name} = {value}"
    assert SCAN.text(text, environ={}).value == text


# A secret-sounding name given a setting, not a secret: redacting it loses the setting from the log for good.
SETTINGS_KEPT = [
    '{"auth": "required"}',
    '{"auth": "disabled", "mode": "Optional"}',
    '"password_policy": "required"',
    '"token_type": "Bearer", "access_token_required": "MANDATORY"',
    '{"secret": "********"}',
    "{'client_secret': '••••••••••', 'api_key': 'xxxxxxxxxxxxxxxx'}",
    '{"password": "[REDACTED]", "auth": "Redacted"}',
    '{"api_key": null, "token": "", "secret": None}',
    "DATABASE_URL=postgresql://app:***@db:5432/x and postgresql://app:********@db/x",  # printed already masked
]


@pytest.mark.parametrize("text", SETTINGS_KEPT)
def test_a_secret_name_given_a_settings_word_or_a_mask_keeps_it(text):
    found = SCAN.text(text, environ={})
    assert found.value == text and not found.counts


def test_a_bearer_scheme_ending_a_line_leaves_the_next_line_alone():
    """An OAuth answer printed as lines: the token is on the same line as its scheme, never on the next."""
    text = "token_type: Bearer\nrefresh_token_expires_in: 3600\nAuthorization: Bearer " + "abcdefghijklmnopqrstuvwxyz"
    found = SCAN.text(text, environ={})
    assert found.value == "token_type: Bearer\nrefresh_token_expires_in: 3600\nAuthorization: Bearer [REDACTED:bearer-token]"
    assert found.counts == {"bearer-token": 1}


# The other side: anything not exactly a settings word or a mask is still a secret.
SETTINGS_LOOKALIKES_CUT = [
    ('{"password": "rEquired"}', "rEquired"),  # not one of the word's three spellings
    ('{"password": "required1"}', "required1"),
    ('{"password": "Disabled!"}', "Disabled!"),
    ('{"auth": "optionally"}', "optionally"),
    ('{"secret": "hunter2hunter2"}', "hunter2hunter2"),
    ('{"secret": "****1234"}', "****1234"),  # a mask that shows part of the secret: cut
    ('{"api_key": "[required]x"}', "[required]x"),
    ("postgresql://app:xx**xa@db/x", "xx**xa"),
]


@pytest.mark.parametrize(("text", "secret"), SETTINGS_LOOKALIKES_CUT)
def test_a_value_near_a_settings_word_or_a_mask_is_still_cut(text, secret):
    found = SCAN.text(text, environ={})
    assert secret not in found.value and found.counts, found.value


SECRET_NAMES = st.sampled_from(["password", "DB_PASSWORD", "passwd", "api_key", "API_KEY", "client_secret", "access_token",
                                "credential", "pass", "passphrase", "auth", "SMTP_AUTH"])
QUOTES = st.sampled_from(['"', "'"])
SEPARATORS = st.sampled_from(["=", ": ", " = ", ":", '": '])
#: What a quoted value may hold (anything else ends it or is a template: `$X`, `{x}`, `%s`).
QUOTABLE = st.characters(codec="utf-8", exclude_categories=("C", "Z"), exclude_characters="\"'$%{}()<>")


@settings(max_examples=300, deadline=None)
@given(name=SECRET_NAMES, sep=SEPARATORS, quote=QUOTES, value=st.text(alphabet=QUOTABLE, min_size=8, max_size=40))
def test_any_quoted_value_that_is_not_a_setting_or_a_mask_is_cut(name, sep, quote, value):
    from chronicle.runtime.redaction import is_plain_setting
    from chronicle.runtime.secret_scan import MARKER_RE

    assume(not is_plain_setting(value) and not MARKER_RE.search(value))
    text = f"{name}{sep}{quote}{value}{quote}"
    found = SCAN.text(text, environ={})
    assert f"{quote}{value}{quote}" not in found.value and found.counts, text


#: A password a person picks: letters with digits and symbols somewhere in it.
PASSWORDS = st.builds(lambda word, tail: word + tail, st.sampled_from(["Required", "disabled", "hunter", "Tr0ub4dor", "correct"]),
                      st.text(alphabet="0123456789!@#&*~+/", min_size=2, max_size=8))
SK_KEYS = st.builds(lambda head, body: head + body, st.sampled_from(["sk-", "sk-proj-", "sk-ant-api03-"]),
                    st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", min_size=24, max_size=60))
_B64URL = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", min_size=8, max_size=60)
JWTS = st.builds(lambda h, p, s: f"eyJ{h}.eyJ{p}.{s}", _B64URL, _B64URL, _B64URL)


@settings(max_examples=300, deadline=None)
@given(name=SECRET_NAMES, sep=SEPARATORS, quote=st.sampled_from(["", '"', "'"]), value=st.one_of(PASSWORDS, SK_KEYS, JWTS))
def test_passwords_keys_and_tokens_given_a_secret_name_are_cut_quoted_or_bare(name, sep, quote, value):
    text = f"{name}{sep}{quote}{value}{quote}\nnext line"
    found = SCAN.text(text, environ={})
    assert value not in found.value and found.counts and found.value.endswith("\nnext line"), text


#: The settings words docs/trust.md lists.
_WORDS = ["required", "optional", "mandatory", "disabled", "enabled", "none", "null", "bearer", "basic", "digest", "true", "false",
          "redacted", "masked", "hidden", "unset"]
SETTINGS = st.builds(lambda word, spell, brackets: (f"[{spell(word)}]" if brackets else spell(word)), st.sampled_from(_WORDS),
                     st.sampled_from([str.lower, str.capitalize, str.upper]), st.booleans())
MASKS = st.text(alphabet="*•●xX#", min_size=8, max_size=40)


@settings(max_examples=300, deadline=None)
@given(name=SECRET_NAMES, sep=SEPARATORS, quote=QUOTES, value=st.one_of(SETTINGS, MASKS))
def test_a_settings_word_or_a_mask_given_any_secret_name_is_kept(name, sep, quote, value):
    text = f'{{"{name}{sep}{quote}{value}{quote}, "n": 1}}'
    found = SCAN.text(text, environ={})
    assert found.value == text and not found.counts


@settings(max_examples=300, deadline=None)
@given(name=SECRET_NAMES, quote=QUOTES, word=SETTINGS,
       change=st.one_of(st.text(alphabet="0123456789!@#&~+-_.", min_size=1, max_size=4).map(lambda t: lambda w: w + t),
                        st.text(alphabet="0123456789!@#&~+", min_size=1, max_size=4).map(lambda t: lambda w: t + w),
                        st.just(lambda w: w[:2] + w[2:].swapcase())))
def test_a_settings_word_changed_by_one_digit_symbol_or_odd_case_is_cut(name, quote, word, change):
    from chronicle.runtime.redaction import is_plain_setting

    value = change(word)
    assume(len(value) >= 8 and not is_plain_setting(value))
    text = f"{name} = {quote}{value}{quote}"
    found = SCAN.text(text, environ={})
    assert f"{quote}{value}{quote}" not in found.value and found.counts.get("assigned-secret") == 1, text


# Public by their form: what the high-entropy net leaves, and the near misses it still cuts (docs/trust.md).
# Built from digests of fixed strings, so they are real base64 of the right size and the same on every run.
def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _digest(algorithm: str, seed: str) -> bytes:
    return hashlib.new(algorithm, seed.encode()).digest()


def _ssh_key(kind: str) -> str:
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    key = (ed25519.Ed25519PrivateKey.from_private_bytes(bytes(range(32))) if kind == "ed25519"
           else ec.derive_private_key(123456789, ec.SECP256R1()))
    return key.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()


PNG = b"\x89PNG\r\n\x1a\n" + b"".join(_digest("sha512", f"png{i}") for i in range(8))
WOFF2 = b"wOF2" + b"".join(_digest("sha512", f"font{i}") for i in range(8))

PUBLIC_KEPT = [
    # Subresource Integrity: lockfiles (npm, yarn, pnpm, npm's older sha1) and HTML.
    '"integrity": "sha512-' + _b64(_digest("sha512", "left-pad")) + '"',
    '  integrity: sha512-' + _b64(_digest("sha512", "react")) + "\n  resolution: {integrity: sha1-" + _b64(_digest("sha1", "x")) + "}",
    '<script src="a.js" integrity="sha384-' + _b64(_digest("sha384", "a.js")) + '" crossorigin></script>',
    "<link integrity=sha256-" + _b64(_digest("sha256", "b.css")) + ">",
    # go.sum
    "golang.org/x/text v0.14.0 h1:" + _b64(_digest("sha256", "text")) + "\ngolang.org/x/text v0.14.0/go.mod h1:"
    + _b64(_digest("sha256", "mod")) + "\n",
    # The model APIs' ids: Anthropic's (and through Bedrock, Vertex), OpenAI chat's; alone, as name=ID, in a path.
    '{"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6"}, {"tool_use_id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB"}',
    "message msg_013Zva2CMHLNnXjNJJKqJ2EF (request-id: req_011CSHoEeqs5C35K2UUqR7Fy)",
    "GET /v1/messages/batches/msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d/results and file_011CNha8iCJcU1wXNR6q4V8w",
    "toolu_bdrk_01RZ6Dr5SfJdEgmWfhCsQzTa msg_vrtx_01AbCdEfGhIjKlMnOpQrStUv",
    "?tool_use_id=toolu_01T1x1fJ34qAmk2tNTrN7Up6&x=1",
    '{"id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", "tool_calls": [{"id": "call_8mTqXsLyTdxPb0a3N7Xd0Bwn"}]}',
    # OpenSSH public keys: authorized_keys, known_hosts.
    _ssh_key("ed25519") + " dev@laptop",
    "github.com " + _ssh_key("ecdsa"),
    # data: URLs of media, by their bytes: CSS, HTML, a payload with parameters, one cut short by a tool.
    ".logo { background: url(data:image/png;base64," + _b64(PNG) + ") }",
    '<img src="data:image/png;base64,' + _b64(PNG) + '">',
    "@font-face { src: url('data:font/woff2;charset=utf-8;base64," + _b64(WOFF2) + "') }",
    "src: url(data:application/octet-stream;base64," + _b64(WOFF2)[:150] + "… (truncated)",
    # A data URL of text whose text holds nothing to cut.
    "data:image/svg+xml;base64," + _b64(b'<svg xmlns="http://www.w3.org/2000/svg"><path d="M0 0h24v24H0z"/></svg>' * 3),
]


@pytest.mark.parametrize("text", PUBLIC_KEPT)
def test_public_forms_are_left_alone(text):
    found = SCAN.text(text, environ={})
    assert found.value == text and not found.counts


def test_a_tool_that_edits_a_lockfile_writes_its_hashes_and_a_thinking_block_quoting_an_id_is_unchanged():
    lock = {"packages": {"node_modules/a": {"integrity": "sha512-" + _b64(_digest("sha512", "a"))}}}
    assert not SCAN.value({"path": "package-lock.json", "content": json.dumps(lock)}, environ={})
    response = ModelResponse.model_validate({"content": [
        {"type": "thinking", "thinking": "toolu_01T1x1fJ34qAmk2tNTrN7Up6 failed; retry", "signature": "Zm9vYmFy"},
        {"type": "text", "text": "done"}], "stop_reason": "end_turn"})
    assert scan_response(response, SCAN)[0] is response  # sent back under its signature as written


RANDOM = "Qm7Zx2Rt9Lp4Vw8Ks1Nd6Hf3Jb5Gc0Ty"  # the cookie FOUND cuts
PUBLIC_NEAR_MISSES = [
    ("sha512-" + _b64(_digest("sha256", "x")), "wrong digest size for the algorithm"),
    ("sha256-" + _b64(_digest("sha512", "x")), "wrong digest size for the algorithm"),
    ("sha256-" + _b64(_digest("sha256", "x"))[:-2] + "Z=", "not canonical base64: the unused bits are set"),
    ("sha512-" + _b64(_digest("sha512", "x")).replace("+", "-").replace("/", "_").rstrip("="), "url-safe, unpadded"),
    ("sha512-" + RANDOM, "a random token behind the prefix"),
    ("sha256-" + _b64(_digest("sha256", "x")) + RANDOM, "a digest with more glued on"),
    ("toolu_" + RANDOM, "no version after the prefix"),
    ("toolu_01" + RANDOM + "Ab3dE5gH9", "longer than an id"),
    ("toolu_01" + "sk-proj-" + RANDOM, "a key glued to the prefix"),
    ("call_" + "ghp_" + RANDOM, "a key glued to the prefix (its own format cuts it)"),
    ("xtoolu_01T1x1fJ34qAmk2tNTrN7Up6", "a prefix inside a longer word"),
    (RANDOM + "=toolu_01T1x1fJ34qAmk2tNTrN7Up6", "a random name before an id"),
    ("msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d/" + RANDOM, "a random segment beside an id"),
    ("h1:" + _b64(_digest("sha384", "x")), "go.sum prefix, wrong size"),
    ("xh1:" + _b64(_digest("sha256", "x")), "h1: inside a longer word"),
    ("AAAAC3NzaC1lZDI1NTE5" + RANDOM, "an SSH key type heading a blob that does not parse"),
    ("data:image/png;base64," + _b64(b"0\x82\x04\xbd" + _digest("sha512", "der")), "a binary payload of no media format (a DER key)"),
    ("data:image/png;" + RANDOM, "no base64 payload"),
    ("url(" + _b64(PNG), "base64 media with no data: URL before it"),
]


@pytest.mark.parametrize(("text", "why"), PUBLIC_NEAR_MISSES)
def test_near_misses_of_public_forms_are_still_cut(text, why):
    found = SCAN.text(f"see {text} here", environ={})
    assert sum(found.counts.values()) == 1 and text not in found.value and found.value.startswith("see "), (why, found.value)


def test_the_go_sum_prefix_is_looked_for_before_the_token_only():
    digest = _b64(_digest("sha256", "x"))
    assert not SCAN.text("h1:" + digest, environ={})
    assert SCAN.text(digest + " h1:", environ={}).counts == {"high-entropy": 1}  # the text's end is not before its start


@pytest.mark.parametrize(("inner", "kind"), [
    (b"AWS_ACCESS_KEY_ID=" + b"AKIA" + b"QX7RZ2MPL4KD9WNT\n", "aws-access-key"),
    (b'{"session": "' + RANDOM.encode() + b'"}', "high-entropy"),
    (b"-----BEGIN " + b"PRIVATE KEY-----\nMIIEv" + b"QIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n", "private-key"),
])
def test_a_data_url_of_text_is_read_and_cut_whole_when_its_text_holds_a_secret(inner, kind):
    text = "fetch('data:application/json;base64," + _b64(inner * 2) + "')"
    found = SCAN.text(text, environ={})
    assert found.value == f"fetch('data:application/json;base64,[REDACTED:{kind}]')" and found.counts == {kind: 2}


def test_a_data_url_of_text_holding_a_process_secret_is_cut():
    found = SCAN.text("data:text/plain;base64," + _b64(b"token: svc-Tq4Wm8Rz2Xk6-longer-value\n"),
                      environ={"MY_SERVICE_TOKEN": "svc-Tq4Wm8Rz2Xk6-longer-value"})
    assert found.value == "data:text/plain;base64,[REDACTED:environment]" and found.counts == {"environment": 1}


@settings(max_examples=200, deadline=None)
@given(algorithm=st.sampled_from(["sha1", "sha256", "sha384", "sha512"]), data=st.binary(min_size=16, max_size=80))
def test_an_sri_digest_is_kept_exactly_when_its_size_is_the_algorithms(algorithm, data):
    token = f"{algorithm}-{_b64(data)}"
    assume(high_entropy(token))  # a token the net judges random (a `/` can split it into segments too short to be)
    found = SCAN.text(f'"integrity": "{token}"', environ={})
    assert (not found.counts) == (len(data) == hashlib.new(algorithm).digest_size), token
