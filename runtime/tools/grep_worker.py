"""The matching half of `grep`, run as its own process (`python -I -S grep_worker.py`).

Python's `re` backtracks and holds the GIL while it does: one pattern such as `(a+)+$` froze
the whole runtime (cancel, signals, lease renewal). In a child process a pattern can run as
long as it likes until the parent's timeout kills it. Standard library only, so the child
starts in milliseconds without site-packages.

Reads one JSON object on stdin: {"pattern", "files": [[shown, path-as-latin-1], ...], "max_hits"};
writes one "shown:line:text" hit per line and stops at max_hits.
"""

import json
import os
import re
import sys

SNIFF_BYTES = 8192
MAX_LINE_CHARS = 2000


def main() -> None:
    request = json.load(sys.stdin)
    try:
        regex = re.compile(request["pattern"])
    except (re.error, OverflowError, RecursionError) as exc:
        sys.stderr.write(str(exc))
        sys.exit(2)
    left = int(request["max_hits"])
    out = sys.stdout.buffer
    for shown, raw_path in request["files"]:
        try:
            with open(os.fsdecode(raw_path.encode("latin-1")), "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        if b"\x00" in data[:SNIFF_BYTES]:
            continue  # binary: skipped, as every file tool treats it
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line):
                if len(line) > MAX_LINE_CHARS:
                    line = line[:MAX_LINE_CHARS] + "…"
                out.write(f"{shown}:{number}:{line}\n".encode("utf-8", errors="backslashreplace"))
                left -= 1
                if left <= 0:
                    out.write(b"\0more\n")
                    return


if __name__ == "__main__":
    main()
