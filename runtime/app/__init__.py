"""The application layer: every use case once, for the CLI, chat, the worker and the public API.

Each module holds a few use cases as plain functions over a ChronicleStore; they validate their
input, record events through the domain, and return data (or raise AppError with the exit code a
command line would use). Nothing here prints or parses flags: clients render what they get.
"""

from .errors import AppError

__all__ = ["AppError"]
