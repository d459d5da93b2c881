"""`@tool`: a plain Python function becomes a Tool the model can call.

The JSON schema comes from the signature, the type hints and the docstring's `Args:` section
(Google, NumPy or reST, parsed by `docstring_parser`, the parser the anthropic SDK's
`beta_tool` uses); the arguments are validated by a pydantic model built from the same
signature before the function runs, so a bad argument is an error result the model reads and
the log records, never a crash. Each decorated function gets its own Tool subclass, so the
durability flags are class attributes exactly as on the built-ins, and `replay` can wrap it
the way it wraps them.
"""

from __future__ import annotations

import base64
import binascii
import functools
import inspect
import json
import math
import re
import types
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, ParamSpec, TypeVar, get_type_hints, overload

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, PydanticUndefinedAnnotation, PydanticUserError, create_model
from pydantic_core import to_jsonable_python

from ..app.errors import DefinitionError
from .base import Tool, ToolError, ToolOutput, truncate
from .base import ToolContext as RuntimeContext
from .imports import remember
from .threads import run_in_thread

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

#: The decorated function's parameters and return type, kept on its tool so that a type checker reads a call of
#: the tool (`add(1, 2)`, which calls the function) as a call of the function.
P = ParamSpec("P")
R = TypeVar("R", covariant=True)


@dataclass(frozen=True)
class ToolContext:
    """What a tool function may ask for by annotating a parameter with this type."""

    workspace: Path
    session_id: str
    tool_call_id: str
    runtime: Any = field(default=None, repr=False, compare=False)

    def update(self, detail: str) -> None:
        """Say how the call is getting on: a live `tool_update` event (`run` shows it, `--json` and `stream`
        yield it), never recorded. Callable from a sync tool (it runs in a thread) and an async one."""
        if self.runtime is not None:
            self.runtime.update(detail)

    def credential(self, name: str, prompt: str = "") -> str:
        """The workspace's credential `name` (runtime/credentials.py). One not stored yet raises AwaitingCredential:
        the call fails with a note the model reads, and the session's next user message is taken as the
        credential (seed 001's auth mode), stored outside the event log; the tool is called again after."""
        from chronicle.runtime.credentials import AwaitingCredential, CredentialStore

        value = CredentialStore(self.workspace).get(name)
        if value is not None:
            return value
        prompt = prompt or f"your {name}"
        io = getattr(self.runtime, "io", None)
        if io is not None:
            io.credential_requests[self.session_id] = {"name": name, "prompt": prompt, "tool_call_id": self.tool_call_id}
        raise AwaitingCredential(name, prompt)

    async def spawn_batch(self, tasks: Sequence[tuple[str, dict[str, Any]]]) -> list[ToolOutput]:
        """Run tools of the session (read-only or idempotent ones) concurrently, as (name, input) pairs; their
        outputs (`.content`, `.is_error`) come back in the order asked, and each run is recorded on this call."""
        from chronicle.runtime.subtasks import spawn_batch

        if self.runtime is None:
            raise ToolError("spawn_batch needs a running session: this context was made by hand")
        return await spawn_batch(self.runtime, tasks)


class FunctionTool(Tool, Generic[P, R]):
    """A Tool whose work is a user function; one subclass per function (see `tool`). What `@tool` returns: typed
    `FunctionTool[P, R]` after the function's parameters and return type, since calling it calls the function."""

    func: ClassVar[Callable[..., Any]]
    context_param: ClassVar[str | None] = None
    #: The function's positional-only parameters, in order: passed by position.
    positional: ClassVar[tuple[str, ...]] = ()
    #: "module:qualname": how another process finds this tool again (runtime/tools/imports.py).
    import_path: ClassVar[str] = ""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """The decorated function still works as a function."""
        result: R = type(self).func(*args, **kwargs)
        return result

    def __repr__(self) -> str:
        return f"<tool {self.name} ({self.import_path})>"

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """Property titles ('Order Id') say nothing the name does not; they are left out of what the model reads."""
        described = super().schema()
        for prop in described["input_schema"].get("properties", {}).values():
            if isinstance(prop, dict):
                prop.pop("title", None)
        return described

    async def run(self, args: Any, ctx: RuntimeContext) -> ToolOutput:
        cls = type(self)
        kwargs = {name: getattr(args, name) for name in type(args).model_fields}
        if cls.context_param:
            kwargs[cls.context_param] = ToolContext(ctx.workspace, ctx.session_id, ctx.tool_call_id, ctx)
        positional = [kwargs.pop(name) for name in cls.positional]  # `def f(a, /, b)`: a cannot be passed by name
        func = functools.partial(cls.func, *positional) if positional else cls.func
        if inspect.iscoroutinefunction(cls.func):
            result = await func(**kwargs)
        else:  # in a thread, which a cancel or a timeout cannot stop: the runner records what it did (threads.py)
            result = await run_in_thread(ctx, cls.name, func, kwargs, describe=text_of)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, ToolOutput):
            return result
        try:
            return as_output(result)
        except ToolError:
            raise
        except (ValueError, TypeError) as exc:  # the tool ran and returned; its result is what cannot be recorded
            raise ToolError(f"{cls.name} returned a {type(result).__name__} that cannot be converted to text or JSON "
                            f"({type(exc).__name__}: {exc}); return a str, a dict, a list or a pydantic model") from None


def text_of(result: Any) -> str:
    """What the model would have read of a result (a late one is recorded so, runtime/tools/threads.py)."""
    return result.content if isinstance(result, ToolOutput) else as_output(result).content


def as_output(result: Any) -> ToolOutput:
    """What the model reads: text as is; a model, dict or list as JSON; content blocks as their text.

    Blocks that are not text (an image, a document) are named in the text by a one-line note and
    recorded whole on the tool call, as MCP tools' rich results are (runtime/tools/mcp_tools.py).
    """
    if result is None:
        return ToolOutput("")
    if isinstance(result, str):
        return ToolOutput(truncate(result))
    if isinstance(result, (bytes, bytearray)):
        try:
            return ToolOutput(truncate(bytes(result).decode("utf-8")))
        except UnicodeDecodeError:
            raise ToolError(f"the tool returned {len(result)} bytes that are not UTF-8 text, which cannot be recorded as its "
                            "result; return a str (decode them), or an image or document block with the bytes in base64") from None
    if isinstance(result, BaseModel) and _as_block(result) is None:
        return ToolOutput(truncate(result.model_dump_json()))
    blocks = [_as_block(b) for b in result] if isinstance(result, list) and result else []
    if blocks and all(b is not None for b in blocks):
        found = [b for b in blocks if b is not None]
        for block in found:
            _check_source(block)
        texts = [b["text"] if b["type"] == "text" else _note(b) for b in found]
        rich = any(b["type"] != "text" for b in found)
        return ToolOutput(truncate("\n".join(texts)), blocks=found if rich else None)
    plain = to_jsonable_python(result)
    try:
        return ToolOutput(truncate(json.dumps(plain, ensure_ascii=False, allow_nan=False)))
    except ValueError:  # a NaN or an infinity: `NaN` is not JSON, and the model is told the result is JSON
        return ToolOutput(truncate(json.dumps(_finite(plain), ensure_ascii=False)))


def _finite(value: Any) -> Any:
    """`value` with each float JSON cannot hold as the string JavaScript names it ("NaN", "Infinity", "-Infinity")."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


#: The fields a content block may have, by its type, as the Messages API defines them. A dict with any other field
#: (`{"type": "text", "text": "hi", "author": "bob"}`, `{"type": "image", "name": "cat.png"}`) is data, sent as JSON
#: whole, not a block whose other fields would be dropped or that is refused as malformed.
BLOCK_FIELDS = {
    "text": frozenset({"type", "text", "cache_control", "citations"}),
    "image": frozenset({"type", "source", "cache_control"}),
    "document": frozenset({"type", "source", "title", "context", "citations", "cache_control"}),
}


def _as_block(item: Any) -> dict[str, Any] | None:
    """`item` as a content block's dict, or None when it is not exactly one: its type known, its fields among that
    type's, a text block's text a str and an image's or document's source present."""
    if isinstance(item, BaseModel):
        item = item.model_dump(mode="json", exclude_none=True)
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if not isinstance(kind, str) or kind not in BLOCK_FIELDS or not set(item) <= BLOCK_FIELDS[kind]:
        return None
    if kind == "text" and not isinstance(item.get("text"), str):
        return None
    if kind != "text" and "source" not in item:
        return None
    return dict(item)


#: Where an image's or a document's bytes may come from, as the Messages API names the source kinds.
SOURCES = {"image": ("base64", "url"), "document": ("base64", "url", "text", "content")}


def _check_source(block: dict[str, Any]) -> None:
    """A rich block is recorded whole and may be sent on later: one the API would reject (no source,
    bytes that are not base64) is the tool's error, recorded as one, not a success that fails later."""
    kind = block["type"]
    if kind == "text":
        return
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") not in SOURCES[kind]:
        raise ToolError(f"the tool returned a malformed {kind} block: its source must be one of "
                        f"{', '.join(SOURCES[kind])} (got {source!r:.80})")
    if source["type"] == "base64":
        if not isinstance(source.get("media_type"), str) or not source["media_type"]:
            raise ToolError(f"the tool returned a malformed {kind} block: a base64 source needs its media_type")
        try:
            base64.b64decode(source.get("data") or "", validate=True)
        except (binascii.Error, ValueError, TypeError):
            raise ToolError(f"the tool returned a malformed {kind} block: its data is not base64") from None


def _note(block: dict[str, Any]) -> str:
    source = block.get("source") or {}
    size = len(source.get("data") or "") * 3 // 4
    return f"[{block['type']}: {source.get('media_type', 'unknown type')}, {size} bytes]"


@overload
def tool(
    func: Callable[P, R],
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    idempotent: bool = False,
    parallel_safe: bool = False,
    requires_approval: bool = False,
    timeout_s: float | None = None,
) -> FunctionTool[P, R]: ...


@overload
def tool(
    func: None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    idempotent: bool = False,
    parallel_safe: bool = False,
    requires_approval: bool = False,
    timeout_s: float | None = None,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def tool(
    func: Callable[P, R] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    idempotent: bool = False,
    parallel_safe: bool = False,
    requires_approval: bool = False,
    timeout_s: float | None = None,
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Make a function a tool: `@tool` or `@tool(read_only=True, ...)`.

    `read_only` tools are re-run by replay and allowed in read-only sub-agents; a tool that is
    neither read_only nor idempotent runs at most once across crashes; `requires_approval`
    pauses the turn until someone approves; `timeout_s` replaces the per-tool default.
    The result is a `FunctionTool` (a `Tool`) that is still called as the function is, and typed so:
    a type checker sees `add(1, 2)` of `@tool def add(a: int, b: int) -> int` as the function's call.
    """

    def build(fn: Callable[P, R]) -> FunctionTool[P, R]:
        return make_tool(fn, name=name, description=description, read_only=read_only, idempotent=idempotent,
                         parallel_safe=parallel_safe, requires_approval=requires_approval, timeout_s=timeout_s)

    return build(func) if func is not None else build


def make_tool(fn: Callable[P, R], *, name: str | None = None, description: str | None = None, read_only: bool = False,
              idempotent: bool = False, parallel_safe: bool = False, requires_approval: bool = False,
              timeout_s: float | None = None) -> FunctionTool[P, R]:
    """A DefinitionError (ChronicleError code 2, and the ValueError or TypeError this raised before) for an option
    or a signature that cannot work, when the program defines the tool rather than when a model calls it."""
    try:
        check_options(fn, name, description, timeout_s, read_only=read_only, idempotent=idempotent,
                      parallel_safe=parallel_safe, requires_approval=requires_approval)
        doc = docstring_parser.parse(inspect.getdoc(fn) or "")
        input_model, context_param = input_model_for(fn, doc)
    except (ValueError, TypeError) as exc:
        raise DefinitionError.of(exc) from None
    tool_name = name or fn.__name__
    if not TOOL_NAME.match(tool_name):
        raise DefinitionError(f"tool name {tool_name!r}: the Messages API takes 1-64 letters, digits, _ and -; pass @tool(name=...)")
    text = description or "\n\n".join(p for p in (doc.short_description, doc.long_description) if p) or tool_name
    attrs: dict[str, Any] = {
        "name": tool_name, "description": text, "Input": input_model, "func": staticmethod(fn),
        "context_param": context_param, "import_path": import_path_of(fn),
        "positional": tuple(p.name for p in inspect.signature(fn).parameters.values() if p.kind is p.POSITIONAL_ONLY),
        "read_only": read_only, "idempotent": idempotent, "parallel_safe": parallel_safe,
        "requires_approval": requires_approval, "timeout_s": timeout_s,
        "__module__": getattr(fn, "__module__", __name__), "__doc__": fn.__doc__,
    }
    cls: type[FunctionTool[P, R]] = type(f"{tool_name}_tool", (FunctionTool,), attrs)
    instance = cls()
    remember(instance)
    return instance


def check_options(fn: Any, name: Any, description: Any, timeout_s: Any, **flags: Any) -> None:
    """@tool's options as their types say: a flag given "yes" or 0 was taken by its truth, silently."""
    if not callable(fn):
        raise TypeError(f"@tool decorates a function, not {type(fn).__name__}")
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        # a functools.partial or a callable object has no name, docstring or import path of its own to record
        raise TypeError(f"@tool decorates a function defined with def or async def, not {type(fn).__name__}; "
                        "wrap it in one (def refund(order_id: str) -> str: return handler(order_id))")
    for option, value in (("name", name), ("description", description)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"@tool({option}=...) takes text, got {type(value).__name__}")
    for flag, value in flags.items():
        if not isinstance(value, bool):
            raise TypeError(f"@tool({flag}=...) takes True or False, got {value!r}")
    if timeout_s is not None:
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not math.isfinite(timeout_s) or timeout_s <= 0:
            raise ValueError(f"@tool(timeout_s=...): timeout_s must be positive seconds, got {timeout_s!r}")


def input_model_for(fn: Callable[..., Any], doc: docstring_parser.Docstring) -> tuple[type[BaseModel], str | None]:
    """A pydantic model of the function's parameters (minus a ToolContext one), with docstring descriptions."""
    signature = inspect.signature(fn)
    try:
        hints = get_type_hints(fn)
    except Exception:  # noqa: BLE001 - a name it cannot resolve (NameError), or a bad annotation: found per parameter below
        hints = {}
        for param in signature.parameters.values():
            hints[param.name] = resolved(fn, param)
    described = {p.arg_name: p.description for p in doc.params if p.description}
    fields: dict[str, Any] = {}
    context_param = None
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {fn.__name__}: *args/**kwargs cannot be described to the model; name the parameters")
        annotation = hints.get(param.name, param.annotation)
        if annotation is ToolContext or annotation is RuntimeContext:
            context_param = param.name
            continue
        if annotation is inspect.Parameter.empty:
            annotation = Any
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, Field(default, description=described.get(param.name)))
    try:
        with warnings.catch_warnings():
            # A parameter named `json`, `schema` or `copy` shadows a BaseModel method on this internal model, which
            # nobody calls: pydantic's warning would reach the program as if its function were wrong.
            warnings.filterwarnings("ignore", message=r'Field name ".*" .*shadows an attribute in parent "BaseModel"')
            model = create_model(  # type: ignore[call-overload]
                f"{fn.__name__}_input", __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False,
                                                              protected_namespaces=()), **fields,
            )
    except PydanticUserError as exc:  # its advice (arbitrary_types_allowed) is about our model, not the program's function
        cause = str(exc).partition(". Set `arbitrary_types_allowed")[0].splitlines()[0]
        raise TypeError(f"tool {fn.__name__}: a parameter's type cannot be described to the model as JSON ({cause}); "
                        "use str, int, float, bool, lists, dicts or pydantic models") from None
    if not model.__pydantic_complete__:  # a model among the types names one not defined: every call would fail
        try:
            model.model_rebuild()
        except PydanticUndefinedAnnotation as exc:
            raise TypeError(f"tool {fn.__name__}: a parameter's type refers to {exc.name!r}, which cannot be resolved "
                            f"where it is used; {RESOLVE_ADVICE}") from None
    return model, context_param


RESOLVE_ADVICE = ("define that type at a module's top level (not inside a function, nor imported only under "
                  "`if TYPE_CHECKING:`), so the tool can describe it to the model and check the model's arguments")


def resolved(fn: Callable[..., Any], param: inspect.Parameter) -> Any:
    """A parameter's annotation as a type; a TypeError naming the parameter and what cannot be resolved. Without this,
    a string annotation (`from __future__ import annotations`) naming a class defined inside a function was left as
    text: a `ctx: ToolContext` then became a field the model was asked to fill, and every call failed later."""
    annotation = param.annotation
    if not isinstance(annotation, str):
        return annotation
    holder = types.SimpleNamespace(__annotations__={param.name: annotation}, __globals__=getattr(fn, "__globals__", {}))
    try:
        return get_type_hints(holder)[param.name]
    except Exception as exc:  # noqa: BLE001 - NameError for a name not in scope; any other failure is said alike
        raise TypeError(f"tool {fn.__name__}: parameter {param.name!r}: cannot resolve its type {annotation!r} "
                        f"({type(exc).__name__}: {exc}); {RESOLVE_ADVICE}") from None


def import_path_of(obj: Any) -> str:
    """Where another process can import this from; `__main__` becomes the module run with `python -m`."""
    module = getattr(obj, "__module__", None) or "__main__"
    if module == "__main__":
        import sys

        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if spec is not None and spec.name:
            module = spec.name
    return f"{module}:{getattr(obj, '__qualname__', getattr(obj, '__name__', '?'))}"


