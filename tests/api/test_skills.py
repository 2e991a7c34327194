"""Skills: loading from folders and packages, what is checked, and what the model reads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flink_agents.api import (
    ChatMessage,
    MessageRole,
    ResourceType,
    Skill,
    SkillError,
    Skills,
    ToolArgumentsError,
)
from flink_agents.api.internal import import_ref
from tests.integrations import skill_pack

PACKAGE = (skill_pack.__name__, "skills")
PACKED = Path(skill_pack.__file__).parent / "skills"


def write_skill(folder: Path, name: str, front: str | None = None, body: str = "Do it.\n"):
    """A skill folder ``folder/name`` whose SKILL.md has ``front`` as its front matter."""
    if front is None:
        front = f"name: {name}\ndescription: The {name} skill.\n"
    skill = folder / name
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(f"---\n{front}---\n{body}")
    return skill


def failure(*args, **kwargs) -> str:
    with pytest.raises(SkillError) as caught:
        Skills(*args, **kwargs)
    return str(caught.value)


# --- loading --------------------------------------------------------------------------------


def test_a_folder_of_skills_loads_each_with_its_fields_and_files():
    skills = Skills.from_local_dir(PACKED)
    assert skills.names() == ["haiku-writer", "unit-converter"]
    converter = skills.get("unit-converter")
    assert converter.description.startswith("Converts quantities between units")
    assert converter.body.startswith("# Converting units\n")
    assert converter.files == ("references/factors.md", "scripts/convert.py")
    assert converter.source == str(PACKED / "unit-converter")
    assert converter.license == "Apache-2.0"
    assert converter.metadata == {"author": "flink-agents tests", "version": "1.0"}
    assert skills.get("haiku-writer").files == ()
    assert len(skills) == 2 and "haiku-writer" in skills and "other" not in skills
    assert [s.name for s in skills] == skills.names()


def test_one_skill_folder_loads_that_skill():
    skills = Skills.from_local_dir(PACKED / "haiku-writer")
    assert skills.names() == ["haiku-writer"]
    assert skills.get("haiku-writer").source == str(PACKED / "haiku-writer")


def test_an_installed_package_loads_its_skills_folder():
    skills = Skills.from_package(PACKAGE)
    assert skills.names() == ["haiku-writer", "unit-converter"]
    converter = skills.get("unit-converter")
    assert converter.source == "tests.integrations.skill_pack:skills/unit-converter"
    assert converter.files == ("references/factors.md", "scripts/convert.py")
    assert converter.read_bytes("references/factors.md").startswith(b"# Factors")


def test_sources_combine_and_the_descriptor_recreates_them(tmp_path):
    write_skill(tmp_path, "extra")
    skills = Skills(dirs=[tmp_path], packages=[PACKAGE], max_file_bytes=10_000)
    descriptor = skills.descriptor()
    assert descriptor.provider == "flink_agents.api:Skills"
    assert descriptor.type is ResourceType.SKILLS
    assert descriptor.args == {
        "dirs": [str(tmp_path)],
        "packages": [["tests.integrations.skill_pack", "skills"]],
        "max_file_bytes": 10_000,
    }
    again = import_ref(descriptor.provider)(**descriptor.args)
    assert again.names() == ["extra", "haiku-writer", "unit-converter"]
    assert again.max_file_bytes == 10_000


def test_a_relative_folder_is_kept_absolute_in_the_descriptor(tmp_path, monkeypatch):
    write_skill(tmp_path / "skills", "local")
    monkeypatch.chdir(tmp_path)
    assert Skills.from_local_dir("skills").descriptor().args == {"dirs": [str(tmp_path / "skills")]}


def test_hidden_files_and_pycache_are_not_skill_files(tmp_path):
    skill = write_skill(tmp_path, "tidy")
    (skill / ".DS_Store").write_text("x")
    (skill / "__pycache__").mkdir()
    (skill / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (skill / "notes.md").write_text("n")
    (tmp_path / ".git").mkdir()  # a hidden folder beside the skills is not a skill
    assert Skills.from_local_dir(tmp_path).get("tidy").files == ("notes.md",)


def test_allowed_tools_and_compatibility_are_read(tmp_path):
    front = (
        "name: tooled\ndescription: Has tools.\ncompatibility: Needs git.\n"
        "allowed-tools: Bash(git:*) Read\nextra-field: ignored\n"
    )
    write_skill(tmp_path, "tooled", front)
    skill = Skills.from_local_dir(tmp_path).get("tooled")
    assert skill.allowed_tools == ("Bash(git:*)", "Read")
    assert skill.compatibility == "Needs git."


# --- what fails to load, and how it says so ---------------------------------------------------


def test_a_skill_folder_without_skill_md_fails_naming_it(tmp_path):
    write_skill(tmp_path, "good")
    (tmp_path / "empty").mkdir()
    assert failure(dirs=[tmp_path]) == (
        f"skill 'empty' ({tmp_path}/empty): the folder has no SKILL.md"
    )


def test_a_missing_folder_and_a_folder_without_skills_fail(tmp_path):
    assert (
        failure(dirs=[tmp_path / "nowhere"]) == f"skills folder {tmp_path}/nowhere does not exist"
    )
    assert failure(dirs=[tmp_path]) == (
        f"skills folder {tmp_path} holds no skill: neither a SKILL.md nor folders of skills"
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Just text.\n", "must begin with YAML front matter"),
        ("---\nname: bad\n", "its front matter has no closing line '---'"),
        ("---\nname: [bad\n---\n", "its front matter is not valid YAML"),
        ("---\n- a list\n---\n", "its front matter must be a mapping of fields"),
        ("---\ndescription: No name.\n---\n", "field 'name' must be non-empty text, got nothing"),
        ("---\nname: bad\n---\n", "field 'description' must be non-empty text, got nothing"),
        ("---\nname: bad\ndescription: ''\n---\n", "field 'description' must be non-empty text"),
        ("---\nname: bad\ndescription: 12\n---\n", "field 'description' must be non-empty text"),
        (
            "---\nname: bad\ndescription: x\nmetadata: [1]\n---\n",
            "field 'metadata' must map names to text",
        ),
    ],
)
def test_bad_front_matter_fails_naming_the_skill_and_file(tmp_path, text, problem):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "SKILL.md").write_text(text)
    message = failure(dirs=[tmp_path])
    assert message.startswith(f"skill 'bad' ({tmp_path}/bad): file 'SKILL.md'")
    assert problem in message


def test_a_name_that_is_not_its_folders_fails(tmp_path):
    write_skill(tmp_path, "folder", "name: other\ndescription: x\n")
    assert failure(dirs=[tmp_path]) == (
        f"skill 'folder' ({tmp_path}/folder): file 'SKILL.md' names the skill 'other', but its "
        "folder is 'folder' (they must be the same)"
    )


@pytest.mark.parametrize("name", ["Upper", "two--hyphens", "-lead", "under_score", "x" * 65])
def test_a_name_outside_the_format_fails(tmp_path, name):
    write_skill(tmp_path, name, f"name: {name}\ndescription: x\n")
    message = failure(dirs=[tmp_path])
    assert f"skill {name!r}" in message
    assert "must be lowercase letters" in message or "over the format's 64" in message


def test_two_skills_of_one_name_fail_naming_both(tmp_path):
    write_skill(tmp_path / "a", "twin")
    write_skill(tmp_path / "b", "twin")
    assert failure(dirs=[tmp_path / "a", tmp_path / "b"]) == (
        f"two skills are named 'twin': {tmp_path}/a/twin and {tmp_path}/b/twin"
    )


def test_a_symlink_out_of_the_skill_folder_fails(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("password")
    skill = write_skill(tmp_path / "skills", "leaky")
    (skill / "references").mkdir()
    os.symlink(secret, skill / "references" / "notes.md")
    assert failure(dirs=[tmp_path / "skills"]) == (
        f"skill 'leaky' ({tmp_path}/skills/leaky): file 'references/notes.md' is a symbolic "
        f"link to {secret}, outside the skill's folder"
    )


def test_a_linked_folder_out_of_the_skill_fails_and_links_inside_are_kept(tmp_path):
    skill = write_skill(tmp_path / "skills", "linked")
    (skill / "real.md").write_text("r")
    os.symlink(skill / "real.md", skill / "alias.md")
    assert Skills.from_local_dir(skill).get("linked").files == ("alias.md", "real.md")
    os.symlink(tmp_path, skill / "up")
    assert "file 'up' is a symbolic link to" in failure(dirs=[skill])


def test_a_skill_md_over_the_limit_fails(tmp_path):
    write_skill(tmp_path, "long", body="x" * 200)
    assert failure(dirs=[tmp_path], max_file_bytes=100) == (
        f"skill 'long' ({tmp_path}/long): file 'SKILL.md' is over max_file_bytes (100 bytes); "
        "move details into files it refers to"
    )


def test_packages_that_are_missing_or_lack_the_folder_fail():
    assert failure(packages=[("no_such_package_x", "skills")]).startswith(
        "skills folder no_such_package_x:skills: package 'no_such_package_x' cannot be imported"
    )
    assert failure(packages=[(skill_pack.__name__, "nowhere")]) == (
        "skills folder tests.integrations.skill_pack:nowhere: the package has no such folder"
    )
    assert failure(packages=[(skill_pack.__name__, "../api")]) == (
        "skills folder tests.integrations.skill_pack:../api: the path must be relative to the "
        "package, without '..'"
    )
    with pytest.raises(TypeError, match="a skills package is a"):
        Skills(packages=["just-a-name"])


# --- what the model reads -------------------------------------------------------------------


def test_the_summary_lists_names_and_descriptions_only():
    skills = Skills.from_package(PACKAGE)
    summary = skills.summary()
    assert "call the tool load_skill with the skill's name" in summary
    assert summary.endswith(
        "Skills:\n"
        "- haiku-writer: Writes a haiku (three lines of 5, 7 and 5 syllables) about a topic. "
        "Use it when asked for a poem.\n"
        "- unit-converter: Converts quantities between units of length and temperature. Use "
        "it when a question asks for a quantity in another unit."
    )
    assert "Converting units" not in summary  # no body before the model asks


def test_the_summary_goes_after_the_leading_system_messages():
    skills = Skills.from_package(PACKAGE)
    system = ChatMessage(role=MessageRole.SYSTEM, content="Be brief.")
    user = ChatMessage(role=MessageRole.USER, content="hi")
    assert skills.add_summary([system, user]) == [system, skills.summary_message(), user]
    assert skills.add_summary([user]) == [skills.summary_message(), user]
    assert skills.summary_message().role is MessageRole.SYSTEM


def test_load_skill_gives_the_instructions_and_the_files():
    skills = Skills.from_package(PACKAGE)
    answer = skills.load_skill("unit-converter")
    assert answer.startswith("Instructions of skill 'unit-converter':\n\n# Converting units\n")
    assert answer.endswith(
        "Files of skill 'unit-converter' (read one with read_skill_file): "
        "references/factors.md, scripts/convert.py"
    )
    assert skills.load_skill("haiku-writer").endswith("Skill 'haiku-writer' has no other files.")
    with pytest.raises(SkillError, match=r"no skill is named 'poems' \(skills: haiku-writer, "):
        skills.load_skill("poems")


def test_read_skill_file_gives_a_files_text():
    skills = Skills.from_package(PACKAGE)
    text = skills.read_skill_file("unit-converter", "references/factors.md")
    assert text == (PACKED / "unit-converter" / "references" / "factors.md").read_text()
    assert skills.read_skill_file("unit-converter", "./scripts/convert.py").startswith('"""')


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("../haiku-writer/SKILL.md", "climbs out of the skill folder ('..')"),
        ("references/../../x", "climbs out of the skill folder ('..')"),
        ("/etc/passwd", "is an absolute path; give it relative to the skill folder"),
        ("C:\\x", "is an absolute path"),
        ("references/other.md", "is not a file of this skill (its files: references/"),
        ("", "is not a file path"),
    ],
)
def test_a_path_out_of_the_skill_or_not_its_file_fails_clearly(path, problem):
    skills = Skills.from_package(PACKAGE)
    with pytest.raises(SkillError) as caught:
        skills.read_skill_file("unit-converter", path)
    source = "tests.integrations.skill_pack:skills/unit-converter"
    assert str(caught.value).startswith(f"skill 'unit-converter' ({source}): file {path!r} ")
    assert problem in str(caught.value)


def test_a_link_made_out_of_the_folder_after_loading_is_refused(tmp_path):
    skill = write_skill(tmp_path / "skills", "swapped")
    (skill / "notes.md").write_text("fine")
    skills = Skills.from_local_dir(skill)
    (tmp_path / "secret").write_text("password")
    (skill / "notes.md").unlink()
    os.symlink(tmp_path / "secret", skill / "notes.md")
    with pytest.raises(SkillError, match=r"is a symbolic link to .*outside the skill's folder"):
        skills.read_skill_file("swapped", "notes.md")


def test_a_binary_file_is_refused_and_a_long_one_is_cut(tmp_path):
    skill = write_skill(tmp_path, "files")
    (skill / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0")
    (skill / "latin1.txt").write_bytes("café".encode("latin-1"))
    (skill / "long.md").write_text("ab" * 60)
    skills = Skills.from_local_dir(skill, max_file_bytes=100)
    for binary in ("logo.png", "latin1.txt"):
        with pytest.raises(SkillError) as caught:
            skills.read_skill_file("files", binary)
        assert str(caught.value) == (
            f"skill 'files' ({skill}): file {binary!r} is binary (not UTF-8 text); only text "
            "files can be read"
        )
    assert skills.read_skill_file("files", "long.md") == (
        "ab" * 50 + "\n\n[cut: the file is longer than 100 bytes (max_file_bytes); this is its "
        "beginning]"
    )


def test_a_character_cut_by_the_limit_is_dropped_not_mangled(tmp_path):
    skill = write_skill(tmp_path, "accents", "name: accents\ndescription: x\n", body="")
    (skill / "accents.md").write_text("é" * 40)  # two bytes each: the 59th is half of one
    text = Skills.from_local_dir(skill, max_file_bytes=59).read_skill_file("accents", "accents.md")
    note = "[cut: the file is longer than 59 bytes (max_file_bytes); this is its beginning]"
    assert text == "é" * 29 + "\n\n" + note


# --- the tools ---------------------------------------------------------------------------


def test_the_tools_are_load_skill_and_read_skill_file_with_the_names_listed():
    skills = Skills.from_package(PACKAGE)
    assert skills.tool_names() == ["load_skill", "read_skill_file"]
    load, read = skills.list_tools()
    assert load.metadata.parameters == {
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "description": "The skill's name, as listed.",
                "enum": ["haiku-writer", "unit-converter"],
            }
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    assert read.metadata.parameters["required"] == ["name", "path"]
    assert load.call({"name": "haiku-writer"}) == skills.load_skill("haiku-writer")
    assert read.call({"name": "unit-converter", "path": "references/factors.md"}).startswith(
        "# Factors"
    )
    assert skills.get_tool("read_skill_file") is read


def test_a_tool_call_without_its_arguments_is_an_arguments_error():
    load, read = Skills.from_package(PACKAGE).list_tools()
    with pytest.raises(ToolArgumentsError, match="'load_skill' needs the argument 'name'"):
        load.call({})
    with pytest.raises(ToolArgumentsError, match="'read_skill_file' needs the argument 'path'"):
        read.call({"name": "haiku-writer", "path": 3})


def test_a_skill_is_plain_data():
    skill = Skills.from_package(PACKAGE).get("haiku-writer")
    assert isinstance(skill, Skill)
    with pytest.raises(AttributeError):
        skill.name = "other"  # type: ignore[misc]
