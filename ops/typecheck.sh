#!/usr/bin/env bash
# mypy cannot follow setuptools' package-dir mapping (chronicle.domain lives in domain/, …), so
# it checks a tree of links with the installed layout: .typecheck/chronicle/{domain,…} -> the folders.
set -euo pipefail
cd "$(dirname "$0")/.."
root=.typecheck/chronicle
rm -rf .typecheck && mkdir -p "$root"
for f in chronicle/*.py chronicle/py.typed; do [ -e "$f" ] && ln -s "../../$f" "$root/$(basename "$f")"; done
for pkg in domain projections runtime; do ln -s "../../$pkg" "$root/$pkg"; done
# Default: the whole package, as CI gates it (domain strict, the rest at mypy's defaults; see pyproject).
if [ $# -eq 0 ]; then set -- -p chronicle; fi
exec "${MYPY:-.venv/bin/mypy}" --config-file pyproject.toml "$@"
