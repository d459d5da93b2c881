"""Continue a session in a fresh process, as `chronicle resume` will: `python -m tests.e2e.resume_helper DB SESSION`.

Kept to the public pieces the CLI uses (build_loop, drive_session) so that the crash tests of
sub-agents do not depend on the resume command, which is built on another branch.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from uuid import UUID

from chronicle.runtime.cli.render import JsonLinesRenderer
from chronicle.runtime.cli.run_cmd import build_loop, drive_session, report
from chronicle.runtime.loop import LoopOptions
from chronicle.runtime.store import ChronicleStore


def main(db: str, session_id: str) -> int:
    store = ChronicleStore(db)
    sid = UUID(session_id)
    spec = store.session(sid).spec
    loop = build_loop(store, spec, spec.provider, None, Path(spec.workspace), LoopOptions(), JsonLinesRenderer())
    return report(asyncio.run(drive_session(loop, sid)), True)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
