"""Your own tools, a person's approval given in code, and the record of every decision.

    python examples/custom_tools.py

`lookup_order` is read-only: replay re-runs it and it may run again after a crash. `refund`
moves money, so it requires approval: the turn pauses (status awaiting_approval, as
`chronicle run` exits 3), this program approves it and resumes the session, the audit
trail shows who decided what, and `why` shows what led to the refund.
"""

from __future__ import annotations

from _setup import provider, workspace

from chronicle import Agent, Chronicle, ToolError, tool

ORDERS = {"A-42": "delivered, box damaged", "A-43": "packing"}


@tool(read_only=True)
def lookup_order(order_id: str) -> str:
    """Find an order by its id.

    Args:
        order_id: The order's id, e.g. "A-42".
    """
    if order_id not in ORDERS:
        raise ToolError(f"no order {order_id}")  # an error result the model reads, and the log records
    return f"order {order_id}: {ORDERS[order_id]}"


@tool(requires_approval=True)
def refund(order_id: str, amount: float, reason: str = "") -> dict:
    """Refund part of an order. Money leaves the company, so a person approves every call.

    Args:
        order_id: The order to refund.
        amount: How much, in euros.
        reason: Why, in a few words.
    """
    return {"order_id": order_id, "refunded_eur": amount, "reason": reason}


support = Agent(
    name="support",
    instructions="You answer questions about orders and refund damaged ones.",
    tools=[lookup_order, refund],
    provider=provider("custom_tools.json"),
)


def main() -> None:
    app = Chronicle()
    result = app.run_sync(support, "Order A-42 arrived broken. Can I get 20 euros back?", workspace=workspace())
    print(f"session {result.session_id}: {result.status} (exit code {result.exit_code})")
    while result.status == "awaiting_approval":
        # The tool call's ApprovalRequested names the tool (the turn records one too, listing the calls it waits on);
        # a call decided already has Approved or Denied after it.
        events = app.log(result.session_id)
        decided = {e["aggregate_id"] for e in events if e["aggregate"] == "tool_call" and e["event"] in ("Approved", "Denied")}
        for entry in events:
            if entry["aggregate"] == "tool_call" and entry["event"] == "ApprovalRequested" and entry["aggregate_id"] not in decided:
                print(f"approval needed: {entry['data']['name']} — approving")
        app.approve(result.session_id)
        result = app.resume(result.session_id)
        print(f"resumed: {result.status}")
    print(f"answer: {result.text}")
    for decision in app.audit(session=result.session_id):
        if decision["kind"].startswith("tool") or decision["kind"] == "approval":
            print(f"audit: {decision['kind']:<10} {decision['name'] or '':<14} {decision['status'] or ''}")
    # Why was money sent? The refund's chain: what the agent had read just before, and who let it through.
    chain = app.why(result.session_id, "refund")
    seen = chain["saw"]["last"]["content"][0]
    approved = next(c for c in chain["tool_call"]["checks"] if c["kind"] == "approved")
    print(f"why refund: after reading {seen['content']!r}, it called refund({chain['tool_call']['input']}); "
          f"approved by {approved['actor'] or approved['by']}; evidence at log positions {chain['evidence']}")
    app.close()


if __name__ == "__main__":
    main()
