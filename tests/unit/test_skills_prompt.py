"""The system prompt built from recorded skills, and SKILL.md front matter as people write it."""

from __future__ import annotations

from pathlib import Path

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.skill import SkillRecord
from chronicle.runtime.skills import SkillError, parse_front_matter, with_skills


def skill(name: str, mode: str, body: str, description: str = "") -> SkillRecord:
    return SkillRecord(name=name, mode=mode, body=body, description=description, sha256="0" * 64, path=f"skills/{name}/SKILL.md")


def test_inline_bodies_go_into_the_system_prompt_and_on_demand_ones_are_only_listed():
    spec = with_skills(AgentSpec(instructions="Be brief.", tools=("read_file",)), [
        skill("style", "inline", "Answer in one sentence."), skill("notes", "on_demand", "SECRET STEPS", "Write notes"),
    ])
    prompt = spec.system_prompt
    assert prompt.startswith("Be brief.\n\n<skills>\n<skill name=\"style\">\nAnswer in one sentence.")
    assert "- notes: Write notes" in prompt and "SECRET STEPS" not in prompt
    assert spec.tools == ("read_file", "load_skill")


def test_a_spec_without_skills_keeps_exactly_its_instructions_so_old_fingerprints_hold():
    spec = AgentSpec(instructions="Be brief.")
    assert spec.system_prompt == "Be brief."
    assert with_skills(spec, [skill("style", "inline", "x")]).tools == ()


def test_front_matter_takes_quotes_comments_and_folded_blocks():
    meta, body = parse_front_matter(
        '---\nname: "notes"  # the name\ndescription: >\n  Two\n  lines\nlicense: MIT\n---\n\nBody\n', Path("SKILL.md")
    )
    assert meta == {"name": "notes", "description": "Two lines", "license": "MIT"}
    assert body == "Body"


def test_front_matter_that_never_closes_is_refused():
    with pytest.raises(SkillError, match="never closed"):
        parse_front_matter("---\nname: x\nbody\n", Path("SKILL.md"))
