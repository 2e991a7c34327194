"""Agent skills under Apache Flink Agents' module path (their 0.3): ours (``docs/skills.md``).

``Skills.from_local_dir`` and ``Skills.from_package`` load them; ``@skills`` declares them in
an agent; a chat model setup's ``skills=[...]`` offers them. Their ``bash`` tool, which runs
a skill's scripts, is not provided: scripts are read, never run.
"""

from flink_agents.api._skills import LOAD_SKILL, READ_SKILL_FILE, Skill, SkillError, Skills

LOAD_SKILL_TOOL = LOAD_SKILL
READ_SKILL_FILE_TOOL = READ_SKILL_FILE

__all__ = ["LOAD_SKILL_TOOL", "READ_SKILL_FILE_TOOL", "Skill", "SkillError", "Skills"]
