"""Agent skills offered to a model a little at a time: the ``Skills`` resource and its tools.

``Skills`` loads skills in the open Agent Skills format (``_skill_folder``) from folders or
installed packages and is a resource: a plan declares it by its sources (``descriptor``),
and each runner loads it again from them.

Progressive disclosure: a model is first told only each skill's name and description
(``Skills.summary``); it reads a skill's instructions, and one of its files, only when it
asks, through two tools the resource offers (``load_skill``, ``read_skill_file``). The
built-in tool action calls them as durable calls, so a restored run gets the recorded
answers instead of reading the files again.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from flink_agents._ids import durable_name
from flink_agents.api._chat import ChatMessage, MessageRole
from flink_agents.api._resources import ResourceDescriptor, ResourceType
from flink_agents.api._skill_folder import Skill, SkillError, load_skills, utf8_text
from flink_agents.api._tools import Tool, ToolArgumentsError, ToolSet, ToolSpec

DEFAULT_MAX_FILE_BYTES = 64 * 1024
"""The most bytes of a file the model is given (``read_skill_file``), and the largest
``SKILL.md`` loaded."""

LOAD_SKILL = "load_skill"
READ_SKILL_FILE = "read_skill_file"


class Skills(ToolSet):
    """Skills loaded from folders and installed packages: a resource of type ``skills``.

    Each source is either one skill's folder (it holds ``SKILL.md``) or a folder of skill
    folders (each of its folders must hold one; hidden folders and ``__pycache__`` are
    skipped). Everything is read and checked when the resource is made: a folder without
    ``SKILL.md``, front matter that is not YAML or lacks ``name`` or ``description``, a
    name that is not its folder's, two skills of one name, or a file that is a symbolic
    link out of its skill's folder fail with a ``SkillError`` naming the skill and the
    file. A skill's other files are read only when asked for.

    As a tool set it offers the model ``load_skill(name)`` (the instructions and the list
    of files) and ``read_skill_file(name, path)`` (one file's text, cut at
    ``max_file_bytes``): name the resource in ``ChatRequestEvent.tools`` or give it to
    ``ReActAgent(skills=...)``. Declare one skills resource per agent: the tool names are
    fixed, so two would offer the same tools.

    Args:
        dirs: folders to load (absolute, or relative to the working directory: the plan
            keeps them absolute, so they must exist at that path where the job runs).
        packages: ``(package, path)`` pairs: the folder ``path`` inside the installed
            package ``package`` (``("my_skills", "skills")``), found with
            ``importlib.resources``; they travel with the package to every worker.
        max_file_bytes: the most bytes of a file given to the model, and the largest
            ``SKILL.md``.

    Raises:
        SkillError: a source or a skill is not valid (see above).
    """

    def __init__(
        self,
        *,
        dirs: Sequence[str | os.PathLike[str]] = (),
        packages: Sequence[Sequence[str]] = (),
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    ) -> None:
        if isinstance(dirs, str | os.PathLike):
            raise TypeError("dirs is a list of folders: Skills(dirs=[folder])")
        if not isinstance(max_file_bytes, int) or max_file_bytes < 1:
            raise ValueError(f"max_file_bytes must be a positive int, got {max_file_bytes!r}")
        self.dirs = tuple(str(Path(d).expanduser().absolute()) for d in dirs)
        self.packages = tuple(_package_pair(pair) for pair in packages)
        self.max_file_bytes = max_file_bytes
        self._skills = load_skills(self.dirs, self.packages, max_file_bytes)
        self._tools: list[Tool] = [_LoadSkill(self), _ReadSkillFile(self)]

    @classmethod
    def from_local_dir(cls, *paths: str | os.PathLike[str], **options: Any) -> Skills:
        """Skills from folders: each one skill's folder or a folder of skill folders."""
        return cls(dirs=paths, **options)

    @classmethod
    def from_package(cls, *pairs: tuple[str, str], **options: Any) -> Skills:
        """Skills from folders inside installed packages: ``(package, path)`` pairs."""
        return cls(packages=pairs, **options)

    def descriptor(self) -> ResourceDescriptor:
        """How a plan declares these skills: by their sources, loaded again by each runner."""
        args: dict[str, Any] = {}
        if self.dirs:
            args["dirs"] = list(self.dirs)
        if self.packages:
            args["packages"] = [list(pair) for pair in self.packages]
        if self.max_file_bytes != DEFAULT_MAX_FILE_BYTES:
            args["max_file_bytes"] = self.max_file_bytes
        return ResourceDescriptor(Skills, ResourceType.SKILLS, **args)

    # --- what an action reads ---------------------------------------------------------

    def __iter__(self) -> Iterator[Skill]:
        return iter(self._skills.values())

    def __len__(self) -> int:
        return len(self._skills)

    def __contains__(self, name: object) -> bool:
        return name in self._skills

    def names(self) -> list[str]:
        """The skills' names, in the order they were loaded."""
        return list(self._skills)

    def get(self, name: str) -> Skill:
        """The skill ``name``.

        Raises:
            SkillError: there is none of that name (the message lists the names).
        """
        found = self._skills.get(name)
        if found is None:
            raise SkillError(f"no skill is named {name!r} (skills: {self._listed()})")
        return found

    def summary(self) -> str:
        """What the model is told first: each skill's name and description, and how to
        read one."""
        lines = [
            "You have skills: instructions for particular tasks, with files. When a task "
            "fits a skill's description, first call the tool "
            f"{LOAD_SKILL} with the skill's name and follow the instructions it returns; "
            f"read a file of the skill with {READ_SKILL_FILE} only when the instructions "
            "call for it.",
            "",
            "Skills:",
        ]
        lines += [f"- {skill.name}: {skill.description}" for skill in self]
        return "\n".join(lines)

    def summary_message(self) -> ChatMessage:
        """``summary`` as a system message."""
        return ChatMessage(role=MessageRole.SYSTEM, content=self.summary())

    def add_summary(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        """``messages`` with ``summary_message`` after their leading system messages."""
        at = next(
            (i for i, m in enumerate(messages) if m.role is not MessageRole.SYSTEM),
            len(messages),
        )
        return [*messages[:at], self.summary_message(), *messages[at:]]

    def tool_names(self) -> list[str]:
        """The names of the tools these skills offer: ``load_skill``, ``read_skill_file``."""
        return [tool.metadata.name for tool in self._tools]

    def load_skill(self, name: str) -> str:
        """What ``load_skill`` answers: the skill's instructions and the list of its files.

        Raises:
            SkillError: no skill of that name.
        """
        skill = self.get(name)
        if skill.files:
            files = (
                f"Files of skill {skill.name!r} (read one with {READ_SKILL_FILE}): "
                + ", ".join(skill.files)
            )
        else:
            files = f"Skill {skill.name!r} has no other files."
        return f"Instructions of skill {skill.name!r}:\n\n{skill.body.strip()}\n\n{files}"

    def read_skill_file(self, name: str, path: str) -> str:
        """What ``read_skill_file`` answers: the text of the skill's file ``path``, cut after
        ``max_file_bytes`` bytes with a note saying so.

        Raises:
            SkillError: no such skill or file, a path out of the skill's folder, or a file
                that is not UTF-8 text.
        """
        skill = self.get(name)
        data = skill.read_bytes(path, limit=self.max_file_bytes + 1)
        cut = len(data) > self.max_file_bytes
        text = utf8_text(data[: self.max_file_bytes], cut)
        if text is None:
            raise skill.error(path, "is binary (not UTF-8 text); only text files can be read")
        if cut:
            text += (
                f"\n\n[cut: the file is longer than {self.max_file_bytes} bytes "
                "(max_file_bytes); this is its beginning]"
            )
        return text

    # --- the tool set -----------------------------------------------------------------

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    def __repr__(self) -> str:
        return f"Skills({self.names()!r})"

    def _listed(self) -> str:
        return ", ".join(self._skills) or "none"


class _SkillTool(Tool):
    """A tool of a ``Skills`` resource; its spec is made once, with the skills' names."""

    def __init__(self, skills: Skills, spec: ToolSpec) -> None:
        self._skills = skills
        self._spec = spec

    @property
    def metadata(self) -> ToolSpec:
        return self._spec

    @property
    def skills(self) -> Skills:
        """The skills this tool reads."""
        return self._skills

    def _text(self, arguments: Mapping[str, Any], key: str) -> str:
        value = arguments.get(key) if isinstance(arguments, Mapping) else None
        if not isinstance(value, str) or not value:
            raise ToolArgumentsError(
                f"tool {self._spec.name!r} needs the argument {key!r} as a non-empty "
                f"string, got {arguments!r}"
            )
        return value


class _LoadSkill(_SkillTool):
    def __init__(self, skills: Skills) -> None:
        description = (
            "Load a skill: its instructions, and the list of its files. Call it before a "
            "task that a skill's description fits."
        )
        parameters = _parameters(skills, {})
        super().__init__(
            skills, ToolSpec(name=LOAD_SKILL, description=description, parameters=parameters)
        )

    @durable_name("flink_agents.api:Skills.load_skill")
    def call(self, arguments: Mapping[str, Any]) -> Any:
        return self._skills.load_skill(self._text(arguments, "name"))


class _ReadSkillFile(_SkillTool):
    def __init__(self, skills: Skills) -> None:
        description = (
            "Read one file of a skill (a reference, a script, a template) as text, by its "
            f"path as {LOAD_SKILL} lists it."
        )
        path = {
            "type": "string",
            "description": "The file's path in the skill, e.g. references/guide.md.",
        }
        parameters = _parameters(skills, {"path": path})
        super().__init__(
            skills, ToolSpec(name=READ_SKILL_FILE, description=description, parameters=parameters)
        )

    @durable_name("flink_agents.api:Skills.read_skill_file")
    def call(self, arguments: Mapping[str, Any]) -> Any:
        name = self._text(arguments, "name")
        return self._skills.read_skill_file(name, self._text(arguments, "path"))


def _parameters(skills: Skills, more: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of a skill tool's arguments: the skill's name (one of the listed),
    then ``more``."""
    name = {"type": "string", "description": "The skill's name, as listed.", "enum": skills.names()}
    properties = {"name": name, **more}
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _package_pair(pair: Any) -> tuple[str, str]:
    if (
        isinstance(pair, str)
        or not isinstance(pair, Sequence)
        or len(pair) != 2
        or not all(isinstance(part, str) for part in pair)
    ):
        raise TypeError(f"a skills package is a (package, path) pair of strings, got {pair!r}")
    return pair[0], pair[1]
