#!/usr/bin/env bash
# The seed features in one offline scripted tour (make demo-seeds): skills, guardrails, delegation with the
# task board and a failure reflection, a routine and the heartbeat, a background job run by a worker, and
# self-repair — each shown through the CLI and then in `audit`. Everything lands in a throwaway directory.
set -euo pipefail
CHRONICLE=${CHRONICLE:-chronicle}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/chronicle-seeds-XXXXXX")
WS="$DIR/workspace"
export CHRONICLE_DB="sqlite:///$DIR/chronicle.db"
mkdir -p "$WS/skills/release-notes"
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

cat > "$WS/skills/release-notes/SKILL.md" <<'EOF'
---
name: release-notes
description: Write release notes from CHANGES.md
when_to_use: the user asks for release notes
---
1. Read CHANGES.md. 2. Group the entries by kind. 3. One line each, newest first.
EOF
echo "v2: faster startup; password=hunter2 in the old config" > "$WS/CHANGES.md"
printf '# Checklist\n- is CHANGES.md up to date?\n' > "$WS/HEARTBEAT.md"
echo "The team writes British English." > "$WS/MEMORY.md"
cat > "$WS/checks.py" <<'EOF'
def redact(text, where):
    return text.replace("hunter2", "[redacted]") if "hunter2" in text else None


def british(text, where):
    return text.replace("color", "colour") if "color" in text else None
EOF
cat > "$WS/chronicle.toml" <<'EOF'
[agents.main]
instructions = "You lead; delegate counting to the counter."

[agents.counter]
description = "Counts things in files"
max_iterations = 1

[guardrails.redact]
check = "checks:redact"
on = ["inbound", "tool_result"]

[guardrails.british]
check = "checks:british"
on = ["final"]

[routines.heartbeat]
heartbeat = true
EOF
cat > "$DIR/script.json" <<'EOF'
{"agents": {
  "main": [
    [{"content": [{"type": "tool_use", "id": "s1", "name": "load_skill", "input": {"name": "release-notes"}}], "stop_reason": "tool_use", "usage": {"input_tokens": 300, "output_tokens": 20}},
     {"content": [{"type": "tool_use", "id": "s2", "name": "read_file", "input": {"path": "CHANGES.md"}}], "stop_reason": "tool_use", "usage": {"input_tokens": 400, "output_tokens": 20}},
     {"content": [{"type": "text", "text": "Release notes: v2 starts faster; new color theme."}], "stop_reason": "end_turn", "usage": {"input_tokens": 500, "output_tokens": 20}}],
    [{"content": [{"type": "tool_use", "id": "d1", "name": "delegate", "input": {"tasks": [{"agent": "counter", "task": "count the widgets in CHANGES.md"}]}}], "stop_reason": "tool_use", "usage": {"input_tokens": 600, "output_tokens": 30}},
     {"content": [{"type": "text", "text": "The counter could not finish; noted."}], "stop_reason": "end_turn", "usage": {"input_tokens": 700, "output_tokens": 20}}]
  ],
  "counter": [[{"content": [{"type": "tool_use", "id": "c1", "name": "list_dir", "input": {"path": "."}}], "stop_reason": "tool_use", "usage": {"input_tokens": 100, "output_tokens": 10}}]],
  "routine-heartbeat": [[{"content": [{"type": "text", "text": "CHANGES.md lists v2 only; add the v2.1 entry."}], "stop_reason": "end_turn", "usage": {"input_tokens": 90, "output_tokens": 12}}]]
}, "title": ["Release notes"]}
EOF
P="scripted:$DIR/script.json"

say "skills found in the workspace (inline ones go into the system prompt, on-demand ones via load_skill)"
$CHRONICLE skills --workspace "$WS"
say "a turn that loads the skill; guardrails change the input, the tool result and the final answer (each change audited)"
$CHRONICLE run "write the release notes (the admin password is hunter2)" --provider "$P" --workspace "$WS"
SID=$($CHRONICLE sessions --json | python3 -c "import json,sys; print([r['session_id'] for r in map(json.loads, sys.stdin) if not r['parent_session_id']][0])")
say "delegation: the child runs out of iterations, its task fails and leaves a reflection"
$CHRONICLE run "count the widgets" --session "$SID" || true
$CHRONICLE tasks "$SID"
say "the task board: a task added ahead of delegation; the model lists its board (list_tasks), then a delegate item claims it (task_id)"
TASK=$($CHRONICLE tasks add "$SID" "recount the widgets in CHANGES.md" --agent counter)
$CHRONICLE tasks "$SID"
python3 - "$DIR/script.json" "$TASK" <<'EOF'
import json, sys
path, task = sys.argv[1], sys.argv[2]
with open(path) as f:
    script = json.load(f)
script["agents"]["main"].append([
    {"content": [{"type": "tool_use", "id": "l2", "name": "list_tasks", "input": {"status": "pending"}}],
     "stop_reason": "tool_use", "usage": {"input_tokens": 750, "output_tokens": 15}},
    {"content": [{"type": "tool_use", "id": "d2", "name": "delegate", "input": {"tasks": [
        {"agent": "counter", "task": "recount the widgets in CHANGES.md", "task_id": task}]}}],
     "stop_reason": "tool_use", "usage": {"input_tokens": 800, "output_tokens": 30}},
    {"content": [{"type": "text", "text": "The counter took the board task."}], "stop_reason": "end_turn",
     "usage": {"input_tokens": 900, "output_tokens": 10}}])
with open(path, "w") as f:
    json.dump(script, f)
EOF
$CHRONICLE run "take the task on the board" --session "$SID" || true
$CHRONICLE tasks "$SID"
say "the heartbeat routine reads HEARTBEAT.md and reports to its own session"
$CHRONICLE routines list --workspace "$WS"
$CHRONICLE routines run heartbeat --provider "$P" --workspace "$WS" || true
$CHRONICLE routines history --workspace "$WS"
say "a background job, run by a worker"
JOB=$($CHRONICLE jobs submit "summarise CHANGES.md" --provider "$P" --workspace "$WS" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['job_id'])")
$CHRONICLE jobs cancel "$JOB" >/dev/null
$CHRONICLE worker --once --workspace "$WS" >/dev/null 2>&1 || true
$CHRONICLE jobs
say "self-repair looks for stuck turns and broken tools"
$CHRONICLE repairs --check
say "every one of those decisions in the audit trail"
$CHRONICLE audit --limit 400 | grep -E "task|reflection|routine|job|session_start|load_skill|read_file|guardrail" || true
echo
echo "store: $CHRONICLE_DB (workspace $WS)"
