"""What /openapi.json says the errors are: the server's one shape (error_answers.py), not FastAPI's.

FastAPI documents every route's 422 as `{"detail": [{"loc", "msg", "type"}]}`, which this server never answers: a
client generated from the document (openapi-generator, openapi-typescript) then failed to parse every refusal, or
read none of its words. Here each 422 is the `Error` the server sends (`error`, `code`, `problems`), and every
route also names it as its `default` response: the 400, 401, 403, 404, 409, 413, 415 and 503 have that shape too.
"""

from __future__ import annotations

from typing import Any, Callable

from fastapi import FastAPI

ERROR = {
    "title": "Error",
    "description": "Every error the server answers: one line, the CLI's exit code for that kind of failure, and for a "
                   "request it could not take (a 400 of a body, a 422) one problem per field.",
    "type": "object",
    "properties": {
        "error": {"type": "string", "title": "Error", "description": "what went wrong, in one line"},
        "code": {"type": "integer", "title": "Code", "description": "the CLI's exit code for that kind of failure "
                                                                     "(2: a request refused as asked)"},
        "problems": {"type": "array", "title": "Problems", "items": {"$ref": "#/components/schemas/Problem"}},
    },
    "required": ["error", "code"],
}
PROBLEM = {
    "title": "Problem",
    "type": "object",
    "properties": {
        "field": {"type": "string", "title": "Field", "description": "where: `prompt`, `query.after`, "
                                                                      "`header.Last-Event-ID`; empty for the whole body"},
        "error": {"type": "string", "title": "Error"},
    },
    "required": ["field", "error"],
}
_ANSWER = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
#: FastAPI's schemas of its own 422 body, which nothing refers to once the 422s are ours.
_FASTAPI_ONLY = ("HTTPValidationError", "ValidationError")


def document_errors(app: FastAPI) -> None:
    """Make `app.openapi()` (and so /openapi.json and /docs) say the errors as they are answered."""
    made: Callable[[], dict[str, Any]] = app.openapi  # FastAPI's: builds the document once, then hands out the same
    rewritten: list[int] = []

    def openapi() -> dict[str, Any]:
        schema = made()
        if id(schema) not in rewritten:
            with_our_errors(schema)
            rewritten.append(id(schema))
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def with_our_errors(schema: dict[str, Any]) -> dict[str, Any]:
    schemas = schema.setdefault("components", {}).setdefault("schemas", {})
    for name in _FASTAPI_ONLY:
        schemas.pop(name, None)
    schemas["Error"], schemas["Problem"] = ERROR, PROBLEM
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            if "422" in responses:
                responses["422"] = {"description": "A field of the request is wrong: `problems` names each", **_ANSWER}
            responses["default"] = {"description": "Any other error (400, 401, 403, 404, 409, 413, 415, 503)", **_ANSWER}
    return schema
