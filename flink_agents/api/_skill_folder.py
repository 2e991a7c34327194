"""Reading skills from their folders, in the open Agent Skills format, and checking them.

A skill is a folder holding ``SKILL.md`` (YAML front matter with ``name`` and
``description``, then markdown instructions) and any other files (``scripts/``,
``references/``, ``assets/``). A folder is read from the file system (``pathlib.Path``) or
from an installed package (a ``Traversable`` of ``importlib.resources``, a zip's too), through
the few methods both have (``_Node``).

What is checked, each failure a ``SkillError`` naming the skill and the file: a folder of
skills whose folder lacks ``SKILL.md``; front matter missing, not YAML, not a mapping, or
without a ``name`` or ``description`` of the format's form and size; a name that is not its
folder's; a ``SKILL.md`` over the size limit; a file that is a symbolic link out of its
skill's folder (at loading, and again when the file is read); a path asked for that is
absolute, climbs out with ``..`` or is not one of the skill's files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Protocol

from flink_agents.api._errors import FlinkAgentsError

SKILL_FILE = "SKILL.md"

_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
_MAX_NAME = 64
_MAX_DESCRIPTION = 1024
_MAX_COMPATIBILITY = 500
"""The format's limits, in characters."""
_SKIPPED = frozenset({"__pycache__"})
"""Folder names never read as skills or skill files (besides hidden names, ``.x``)."""


class SkillError(FlinkAgentsError, ValueError):
    """A skill that cannot be loaded or read; the message names the skill and the file."""


class _Node(Protocol):
    """A folder or file of a skill: a ``pathlib.Path`` or an installed package's
    ``Traversable``."""

    @property
    def name(self) -> str: ...

    def is_dir(self) -> bool: ...

    def is_file(self) -> bool: ...

    def iterdir(self) -> Iterator[Any]: ...

    def open(self, mode: str = "r") -> BinaryIO: ...

    def __truediv__(self, child: str) -> Any: ...


@dataclass(frozen=True)
class Skill:
    """One loaded skill.

    Attributes:
        name: its name (lowercase letters, digits and hyphens; its folder's name).
        description: what it does and when to use it, as the model first sees it.
        body: the instructions of ``SKILL.md`` after its front matter.
        files: its other files, as paths relative to its folder (``scripts/fill.py``),
            sorted; hidden files and ``__pycache__`` are left out, and so are the files
            under a folder that is a symbolic link (a link may loop).
        source: where it was loaded from: its folder, or ``package:path`` in a package.
        license: the front matter's ``license``, if any.
        compatibility: the front matter's ``compatibility``, if any.
        metadata: the front matter's ``metadata`` (text by name).
        allowed_tools: the front matter's ``allowed-tools``, split on spaces (read, not
            enforced: no tool runs a skill's scripts).
        folder: where its files are read from.
    """

    name: str
    description: str
    body: str
    files: tuple[str, ...]
    source: str
    license: str | None = None
    compatibility: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    allowed_tools: tuple[str, ...] = ()
    folder: _Node | None = field(default=None, repr=False, compare=False)

    def read_bytes(self, path: str, limit: int | None = None) -> bytes:
        """The content of its file ``path`` (relative to its folder, ``/``-separated), or
        its first ``limit`` bytes.

        Raises:
            SkillError: the path is absolute, climbs out with ``..``, is not one of its
                ``files``, is a symbolic link that now leads out of its folder, or cannot
                be read.
        """
        relative = self._checked_path(path)
        if self.folder is None:
            raise self.error(path, "cannot be read: the skill has no folder")
        node = self.folder
        for part in PurePosixPath(relative).parts:
            node = node / part
        if isinstance(node, Path) and isinstance(self.folder, Path):
            _check_inside(self.name, self.source, self.folder, node, relative)
        try:
            with node.open("rb") as file:
                return file.read() if limit is None else file.read(limit)
        except OSError as error:
            raise self.error(relative, f"cannot be read: {error}") from error

    def error(self, path: str, problem: str) -> SkillError:
        """A ``SkillError`` about its file ``path``, naming the skill and where it is."""
        return SkillError(f"skill {self.name!r} ({self.source}): file {path!r} {problem}")

    def _checked_path(self, path: str) -> str:
        """``path`` as ``files`` lists it.

        Raises:
            SkillError: it escapes the folder or is not one of the skill's files.
        """
        if not isinstance(path, str) or not path.strip():
            raise self.error(str(path), "is not a file path")
        posix = PurePosixPath(path.replace("\\", "/"))
        if posix.is_absolute() or re.match(r"[A-Za-z]:", path):
            raise self.error(path, "is an absolute path; give it relative to the skill folder")
        if ".." in posix.parts:
            raise self.error(path, "climbs out of the skill folder ('..')")
        relative = posix.as_posix()
        if relative not in self.files:
            listed = ", ".join(self.files) if self.files else "none"
            raise self.error(path, f"is not a file of this skill (its files: {listed})")
        return relative


def load_skills(
    dirs: Sequence[str], packages: Sequence[tuple[str, str]], max_skill_bytes: int
) -> dict[str, Skill]:
    """The skills of the folders ``dirs`` and of the ``(package, path)`` folders of installed
    packages, by name, in that order. Each folder is one skill's (it holds ``SKILL.md``) or
    holds skill folders (hidden ones and ``__pycache__`` skipped).

    Raises:
        SkillError: a folder or a skill is not valid, or two skills have one name.
    """
    folders: list[tuple[_Node, str]] = []
    for directory in dirs:
        path = Path(directory)
        if not path.is_dir():
            what = "is not a folder" if path.exists() else "does not exist"
            raise SkillError(f"skills folder {directory} {what}")
        folders.append((path, directory))
    folders += [
        (_package_folder(package, inside), f"{package}:{inside}") for package, inside in packages
    ]
    found: dict[str, Skill] = {}
    for folder, source in folders:
        for skill in _skills_in(folder, source, max_skill_bytes):
            if skill.name in found:
                raise SkillError(
                    f"two skills are named {skill.name!r}: {found[skill.name].source} and "
                    f"{skill.source}"
                )
            found[skill.name] = skill
    return found


def utf8_text(data: bytes, cut: bool) -> str | None:
    """``data`` as text, or None when it is binary (a NUL byte, or not UTF-8); a character
    ``cut`` in two at the end by a size limit is dropped."""
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        if cut and error.start >= len(data) - 3 and error.end == len(data):
            return data[: error.start].decode("utf-8")
        return None


def _skills_in(folder: _Node, source: str, max_skill_bytes: int) -> Iterator[Skill]:
    """The skill ``folder`` is, or the skills of the folders in it."""
    if (folder / SKILL_FILE).is_file():
        yield _load_skill(folder, source, max_skill_bytes)
        return
    children = sorted(
        (c for c in folder.iterdir() if c.is_dir() and not _skipped(c.name)),
        key=lambda c: c.name,
    )
    if not children:
        raise SkillError(
            f"skills folder {source} holds no skill: neither a {SKILL_FILE} nor folders of skills"
        )
    for child in children:
        yield _load_skill(child, f"{source.rstrip('/')}/{child.name}", max_skill_bytes)


def _load_skill(folder: _Node, source: str, max_skill_bytes: int) -> Skill:
    where = f"skill {folder.name!r} ({source})"
    skill_file = folder / SKILL_FILE
    if not skill_file.is_file():
        raise SkillError(f"{where}: the folder has no {SKILL_FILE}")
    if isinstance(folder, Path):
        _check_inside(folder.name, source, folder, skill_file, SKILL_FILE)
    with skill_file.open("rb") as file:
        data = file.read(max_skill_bytes + 1)
    if len(data) > max_skill_bytes:
        raise SkillError(
            f"{where}: file {SKILL_FILE!r} is over max_file_bytes ({max_skill_bytes} bytes); "
            "move details into files it refers to"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise SkillError(f"{where}: file {SKILL_FILE!r} is not UTF-8 text: {error}") from None
    front, body = _split_front_matter(text, f"{where}: file {SKILL_FILE!r}")
    fields = _front_matter_fields(front, f"{where}: file {SKILL_FILE!r}")
    if fields["name"] != folder.name:
        raise SkillError(
            f"{where}: file {SKILL_FILE!r} names the skill {fields['name']!r}, but its folder "
            f"is {folder.name!r} (they must be the same)"
        )
    files = tuple(_files(folder.name, source, folder, folder, ""))
    return Skill(body=body, files=files, source=source, folder=folder, **fields)


def _package_folder(package: str, inside: str) -> _Node:
    """The folder ``inside`` of the installed package ``package``.

    Raises:
        SkillError: the package cannot be imported, or has no such folder.
    """
    from importlib import resources  # here: only packaged skills need it

    where = f"skills folder {package}:{inside}"
    parts = PurePosixPath(inside.replace("\\", "/")).parts if inside else ()
    if PurePosixPath(inside).is_absolute() or ".." in parts:
        raise SkillError(f"{where}: the path must be relative to the package, without '..'")
    try:
        folder: _Node = resources.files(package)
    except (ImportError, TypeError) as error:
        raise SkillError(f"{where}: package {package!r} cannot be imported: {error}") from None
    for part in parts:
        folder = folder / part
    if not folder.is_dir():
        raise SkillError(f"{where}: the package has no such folder")
    return folder


def _skipped(name: str) -> bool:
    return name.startswith(".") or name in _SKIPPED


def _files(name: str, source: str, root: _Node, folder: _Node, prefix: str) -> Iterator[str]:
    """The files under ``folder`` as paths relative to the skill's folder ``root``, sorted.

    Raises:
        SkillError: a symbolic link leads out of the skill's folder.
    """
    for child in sorted(folder.iterdir(), key=lambda c: c.name):
        relative = f"{prefix}{child.name}"
        if _skipped(child.name) or relative == SKILL_FILE:
            continue
        if isinstance(child, Path) and child.is_symlink():
            _check_inside(name, source, root, child, relative)  # type: ignore[arg-type]
            if child.is_file():  # a linked folder is not followed
                yield relative
        elif child.is_dir():
            yield from _files(name, source, root, child, f"{relative}/")
        elif child.is_file():
            yield relative


def _check_inside(name: str, source: str, root: Path, path: Path, relative: str) -> None:
    """Raises ``SkillError`` when ``path`` (a link, or under one) leads out of ``root``."""
    target = path.resolve()
    if not target.is_relative_to(root.resolve()):
        raise SkillError(
            f"skill {name!r} ({source}): file {relative!r} is a symbolic link to {target}, "
            "outside the skill's folder"
        )


# --- front matter -------------------------------------------------------------------------


def _split_front_matter(text: str, where: str) -> tuple[str, str]:
    """The front matter of a ``SKILL.md`` text and its body."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError(
            f"{where} must begin with YAML front matter: a line '---', the fields (name, "
            "description, ...), then another line '---'"
        )
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            return "".join(lines[1:end]), "".join(lines[end + 1 :])
    raise SkillError(f"{where}: its front matter has no closing line '---'")


def _front_matter_fields(front: str, where: str) -> dict[str, Any]:
    """The ``Skill`` fields the front matter gives, checked; other keys are ignored."""
    import yaml  # here, not at the top: YAML is parsed only where a file is read

    try:
        data = yaml.safe_load(front)
    except yaml.YAMLError as error:
        raise SkillError(f"{where}: its front matter is not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise SkillError(
            f"{where}: its front matter must be a mapping of fields (name, description, ...), "
            f"got {type(data).__name__}"
        )
    name = _text_field(data, "name", where, required=True, limit=_MAX_NAME)
    if not _NAME.fullmatch(name):
        raise SkillError(
            f"{where}: name {name!r} must be lowercase letters, digits and single hyphens, "
            "neither starting nor ending with a hyphen"
        )
    return {
        "name": name,
        "description": _text_field(data, "description", where, True, _MAX_DESCRIPTION),
        "license": _text_field(data, "license", where),
        "compatibility": _text_field(data, "compatibility", where, limit=_MAX_COMPATIBILITY),
        "metadata": _metadata(data.get("metadata"), where),
        "allowed_tools": _allowed_tools(data.get("allowed-tools"), where),
    }


def _text_field(
    data: Mapping[str, Any], key: str, where: str, required: bool = False, limit: int = 0
) -> Any:
    value = data.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        got = "nothing" if value is None else repr(value)
        raise SkillError(f"{where}: field {key!r} must be non-empty text, got {got}")
    value = value.strip()
    if limit and len(value) > limit:
        raise SkillError(
            f"{where}: field {key!r} is {len(value)} characters, over the format's {limit}"
        )
    return value


def _metadata(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or any(
        isinstance(v, dict | list) or v is None for v in value.values()
    ):
        raise SkillError(f"{where}: field 'metadata' must map names to text, got {value!r}")
    return {str(k): str(v) for k, v in value.items()}


def _allowed_tools(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise SkillError(f"{where}: field 'allowed-tools' must be names separated by spaces")
