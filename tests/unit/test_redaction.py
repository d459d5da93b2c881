"""Secrets are hidden by name, by value and by shape, not only when they are exactly the API key (issue 17)."""

from __future__ import annotations

from chronicle.runtime.config import redact
from chronicle.runtime.redaction import redact_secrets

ENV = {
    "ANTHROPIC_API_KEY": "sk-ant-api03-abcdefghijklmnop",
    "GITHUB_TOKEN": "ghp_1234567890abcdef",
    "MY_DB_PASSWORD": "correct-horse",
    "CHRONICLE_DB": "postgresql://app:s3cr%2Fet@db.internal:5432/chronicle",
    "KEYBOARD_LAYOUT": "dvorak-intl",
    "HOME": "/home/someone",
}


def test_values_of_secret_named_variables_and_dsn_passwords_are_hidden_anywhere_in_text():
    text = (
        "key sk-ant-api03-abcdefghijklmnop token=ghp_1234567890abcdef pw correct-horse "
        "dsn password s3cr/et or s3cr%2Fet; layout dvorak-intl in /home/someone"
    )
    out = redact_secrets(text, environ=ENV)
    for secret in ("sk-ant-api03-abcdefghijklmnop", "ghp_1234567890abcdef", "correct-horse", "s3cr/et", "s3cr%2Fet"):
        assert secret not in out
    assert "dvorak-intl" in out and "/home/someone" in out  # not secrets: kept


def test_credentials_are_hidden_by_shape_even_when_the_process_does_not_hold_them():
    out = redact_secrets("use sk-ant-api03-XYZXYZXYZXYZXYZ and Authorization: Bearer abcdefghijklmnopqrstuvwxyz", environ={})
    assert "XYZXYZ" not in out and "abcdefghijklmnop" not in out


def test_a_dsn_password_with_unencoded_reserved_characters_is_redacted_whole():
    for password in ("pa/ss", "pa#ss", "pa?ss", "p@ss/w#rd?x"):
        url = f"postgresql://user:{password}@127.0.0.1:5432/db?schema=s"
        shown = redact(url)
        assert password not in shown and shown.startswith("postgresql://user:***@") and shown.endswith("5432/db?schema=s")
    assert redact("postgresql://postgres@127.0.0.1:5432/db") == "postgresql://postgres@127.0.0.1:5432/db"


def test_a_variable_naming_a_key_file_is_a_path_and_stays_readable():
    """CHRONICLE_CIPHER_KEY_FILE holds where the key is: an error about it must say which file."""
    env = {**ENV, "CHRONICLE_CIPHER_KEY_FILE": "/etc/chronicle/cipher.key", "CHRONICLE_CIPHER_KEY": "c2VjcmV0LWtleS1ieXRlcw=="}
    out = redact_secrets("cannot read /etc/chronicle/cipher.key; key c2VjcmV0LWtleS1ieXRlcw==", environ=env)
    assert out == "cannot read /etc/chronicle/cipher.key; key ***"


def test_both_ways_of_giving_the_cipher_key_at_once_are_refused():
    import pytest

    from chronicle.runtime.config import ConfigError
    from chronicle.runtime.encryption import cipher_env

    with pytest.raises(ConfigError, match="both CHRONICLE_CIPHER_KEY and CHRONICLE_CIPHER_KEY_FILE"):
        cipher_env({"CHRONICLE_CIPHER_KEY": "a" * 44, "CHRONICLE_CIPHER_KEY_FILE": "/nonexistent"})


def test_pass_auth_and_passphrase_variables_are_secret_named_and_their_values_hidden_wherever_they_appear():
    """A bash command can print its parent's environment (/proc/PPID/environ): the values of these names are cut
    verbatim, whatever they look like; SSH_AUTH_SOCK and GIT_ASKPASS name a socket and a program, not secrets."""
    env = {"DB_PASS": "plainpassword", "SMTP_AUTH": "mailuser:letmein", "KEY_PASSPHRASE": "open sesame now",
           "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock", "GIT_ASKPASS": "/usr/bin/askpass-helper"}
    out = redact_secrets("\0".join(f"{k}={v}" for k, v in env.items()), environ=env)
    for secret in ("plainpassword", "mailuser:letmein", "open sesame now"):
        assert secret not in out
    assert "/tmp/ssh-agent.sock" in out and "/usr/bin/askpass-helper" in out


def test_a_secret_named_variable_holding_a_setting_or_a_mask_does_not_hide_that_word_everywhere():
    """`SMTP_AUTH=disabled` configures; taking its value for a secret cut the word "disabled" from every text and log."""
    from chronicle.runtime.secret_scan import SecretScanner

    env = {"SMTP_AUTH": "disabled", "GIT_TOKEN_MODE": "Required", "MIRROR_URL": "https://app:********@mirror.example/x",
           "MY_DB_PASSWORD": "disabled9"}
    text = "login disabled; a key is Required; shown as ******** ; but disabled9 is the password"
    assert redact_secrets(text, environ=env) == "login disabled; a key is Required; shown as ******** ; but *** is the password"
    found = SecretScanner().text(text, environ=env)
    assert found.value == text.replace("disabled9", "[REDACTED:environment]") and found.counts == {"environment": 1}


def test_what_an_mcp_server_is_given_as_a_secret_and_what_it_is_not(monkeypatch):
    """`${VAR}` values but the shell's own (PATH, HOME, TZ, LC_*), whole values of secret-named keys and credential
    headers with an Authorization's credential alone, none of a variable that is not set (the server never gets it)."""
    from chronicle.runtime.tools.mcp_config import McpServerConfig

    monkeypatch.setenv("UNIT_REF_A", "value-from-a-ref")
    monkeypatch.setenv("TZ", "Europe/Amsterdam")
    monkeypatch.delenv("UNIT_UNSET", raising=False)
    config = McpServerConfig(
        name="s", url="https://mcp.example.com/mcp",
        headers={"Authorization": "Bearer ${UNIT_REF_A}", "X-Api-Key": "written-key-1", "Cookie": "sid=${UNIT_UNSET}",
                 "Accept": "application/json", "X-Zone": "${TZ}"},
    )
    assert sorted(config.secrets()) == sorted(["value-from-a-ref", "Bearer value-from-a-ref", "value-from-a-ref", "written-key-1"])
    assert redact_secrets("Accept: application/json Zone: Europe/Amsterdam") == "Accept: application/json Zone: Europe/Amsterdam"
    assert redact_secrets("sent Bearer value-from-a-ref, then written-key-1") == "sent ***, then ***"
