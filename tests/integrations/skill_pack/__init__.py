"""An installed package that ships agent skills as package data (``skills/``), as a user's
skills package would: ``Skills.from_package(("tests.integrations.skill_pack", "skills"))``."""
