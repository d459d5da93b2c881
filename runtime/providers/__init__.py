"""Providers by name: `scripted:PATH` for scripts, `anthropic` for Claude, `openai-compatible` for chat-completions servers."""

from __future__ import annotations

import os
from pathlib import Path

from .base import ModelRequest, Provider
from .env_settings import SettingError
from .scripted import ScriptedProvider, ScriptError

#: The newest Sonnet the installed SDK lists; claude-sonnet-4-5 is deprecated (end of life
#: 2026-11-30 per the SDK's deprecation table). Override with --model / CHRONICLE_MODEL.
DEFAULT_MODEL = "claude-sonnet-5-5"


class ProviderConfigError(ValueError):
    """No usable provider; the message says how to get one."""


def default_provider_name() -> str | None:
    return "anthropic" if os.environ.get("ANTHROPIC_API_KEY") else None


def default_model(provider: str | None = None) -> str:
    """The model when none is given; a chat-completions server has no default we could guess."""
    if provider == "openai-compatible":
        return os.environ.get("CHRONICLE_MODEL") or os.environ.get("OPENAI_MODEL") or ""
    return os.environ.get("CHRONICLE_MODEL") or DEFAULT_MODEL


#: The providers by name, besides `scripted:PATH`.
PROVIDER_NAMES = ("anthropic", "openai-compatible")


def check_provider_name(name: str) -> None:
    """ProviderConfigError for a name no provider has, from its shape alone: nothing is read (a script is read when
    a run makes its provider), so an Agent is checked where the program defines it."""
    if name.startswith("scripted:"):
        if not name[len("scripted:"):].strip():
            raise ProviderConfigError("the scripted provider needs a file: --provider scripted:PATH")
    elif name not in PROVIDER_NAMES:
        raise ProviderConfigError(f"unknown provider {name!r}: use anthropic, openai-compatible or scripted:PATH")


def make_provider(name: str | None, model: str | None = None) -> Provider:
    name = name or default_provider_name()
    if name is None:
        raise ProviderConfigError(
            "no model provider: set ANTHROPIC_API_KEY to use Claude, or give the scripted provider for an offline run: "
            '--provider scripted:PATH (in Python, Agent(provider="scripted:PATH"))'
        )
    check_provider_name(name)
    if name.startswith("scripted:"):
        path = Path(name[len("scripted:"):]).expanduser().resolve()
        try:
            return ScriptedProvider(path, model=model or "scripted")
        except ScriptError as exc:
            raise ProviderConfigError(str(exc)) from None
        except OSError as exc:
            raise ProviderConfigError(f"cannot read script {path}: {exc.strerror or exc}") from None
    if name == "anthropic":
        try:
            from .anthropic_provider import AnthropicProvider
        except ImportError as exc:  # pragma: no cover - the provider module ships with the package
            raise ProviderConfigError(f"the anthropic provider is unavailable: {exc}") from None
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise ProviderConfigError("--provider anthropic needs ANTHROPIC_API_KEY in the environment")
        try:
            return AnthropicProvider(model=model or default_model())
        except SettingError as exc:
            raise ProviderConfigError(str(exc)) from None
    if name == "openai-compatible":
        from .openai_compat import OpenAICompatProvider

        chosen = model or os.environ.get("OPENAI_MODEL")
        if not chosen or chosen == DEFAULT_MODEL:
            raise ProviderConfigError("--provider openai-compatible needs a model: pass --model NAME (or set OPENAI_MODEL)")
        return OpenAICompatProvider(model=chosen, base_url=os.environ.get("OPENAI_BASE_URL") or None)
    raise AssertionError(f"provider {name!r} passed check_provider_name but has no maker")  # pragma: no cover


__all__ = ["ModelRequest", "Provider", "ScriptedProvider", "ScriptError", "check_provider_name", "make_provider", "ProviderConfigError"]
