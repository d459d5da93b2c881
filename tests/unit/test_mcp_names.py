"""The names the model sees for a server's tools (runtime/tools/mcp_tools.py): distinct, and the same whatever
order the server lists its tools in."""

from __future__ import annotations

import pytest

from chronicle.runtime.tools.mcp_config import McpConfigError
from chronicle.runtime.tools.mcp_tools import public_names


def test_a_clash_after_cleaning_suffixes_the_cleaned_name_in_any_order():
    forward = dict(zip(["a.b", "a_b", "c"], public_names("s", ["a.b", "a_b", "c"]), strict=True))
    backward = dict(zip(["c", "a_b", "a.b"], public_names("s", ["c", "a_b", "a.b"]), strict=True))
    assert forward == backward
    assert forward["a_b"] == "s__a_b" and forward["c"] == "s__c"
    assert forward["a.b"].startswith("s__a_b_") and len(forward["a.b"]) == len("s__a_b_") + 8
    both_cleaned = public_names("s", ["a.b", "a b"])
    assert len(set(both_cleaned)) == 2 and "s__a_b" not in both_cleaned


def test_a_server_listing_one_name_twice_is_refused_naming_it():
    with pytest.raises(McpConfigError, match="MCP server 's' lists two tools the model would both see as 's__x': 'x' and 'x'"):
        public_names("s", ["x", "x"])
