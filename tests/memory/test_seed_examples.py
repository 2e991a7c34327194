"""The memory examples of the seed documents, kept as close to verbatim as possible.

Seed 000 ("Short-Term Memory Design", section "Examples") and seed 001 ("Comprehensive
Memory Management", section "Sensory Memory"). ``ctx.get_short_term_memory()`` and
``sensory_memory`` are stood in for by the root of a ``FlatMemory`` over a ``DictState``.
"""

from typing import Any

from pydantic import BaseModel

from flink_agents.api import MemoryObject
from flink_agents.memory import DictState, FlatMemory, to_dict


class User(BaseModel):
    """Seed 001's ``User(name="john", age=13)``."""

    name: str
    age: int


def new_memory() -> MemoryObject:
    return FlatMemory(DictState()).root()


def test_seed_000_examples() -> None:
    root = new_memory()  # root = ctx.get_short_term_memory()
    root.set("x", 100)
    root.set("y", "abc")
    # Seed typo: `ojb_z = root.new_object("z")`, while the rest of the example uses `obj_z`.
    obj_z = root.new_object("z")
    # {
    #   "x" : 100,
    #   "y" : "abc"
    #   "z" : {}
    # }
    assert to_dict(root) == {"x": 100, "y": "abc", "z": {}}

    obj_z.set("m", 0.5)
    obj_z.set("n.j", True)
    # {
    #   "x" : 100,
    #   "y" : "abc"
    #   "z" : {
    #     "m" : 0.5,
    #     "n" : {
    #       "j" : True
    #     }
    #   }
    # }
    assert to_dict(root) == {"x": 100, "y": "abc", "z": {"m": 0.5, "n": {"j": True}}}

    assert root.get("x") == 100  # 100
    assert root.get("z.m") == 0.5  # 0.5
    assert root.get("xx") is None  # None
    assert root.get("z.mm") is None  # None

    assert root.is_exist("x") is True  # True
    assert root.is_exist("xx") is False  # False
    assert root.is_exist("z.m") is True  # True
    assert root.is_exist("z.mm") is False  # False

    obj_n = root.get("z.n")
    assert isinstance(obj_n, MemoryObject)
    assert obj_n.get("j") is True  # True

    assert obj_z.get_field_names() == ["m", "n"]  # ["m", "n"]
    fields = obj_z.get_fields()  # {"m" : 0.5, "n" : MemoryObject}
    assert list(fields) == ["m", "n"]
    assert fields["m"] == 0.5
    assert isinstance(fields["n"], MemoryObject)
    assert fields["n"].get("j") is True


def test_seed_001_primitive_types() -> None:
    sensory_memory = new_memory()
    sensory_memory.set("name", "john")
    name: str = sensory_memory.get("name")
    assert name == "john"


def test_seed_001_list() -> None:
    sensory_memory = new_memory()
    # Seed typos: `sensory.set ("nums", ...)` for `sensory_memory.set(...)`, and `List [Int]`.
    sensory_memory.set("nums", [1, 2, 3, 4, 5])
    nums: list[int] = sensory_memory.get("nums")
    assert nums == [1, 2, 3, 4, 5]


def test_seed_001_map() -> None:
    sensory_memory = new_memory()
    sensory_memory.set("user", {"name": "john", "age": 13})
    user: dict[str, Any] = sensory_memory.get("user")
    assert user == {"name": "john", "age": 13}
    assert not isinstance(user, MemoryObject)  # a dict value, not an object


def test_seed_001_object() -> None:
    sensory_memory = new_memory()
    sensory_memory.set("user", User(name="john", age=13))
    user: User = sensory_memory.get("user")
    assert isinstance(user, User)
    assert user == User(name="john", age=13)


def test_seed_001_nested_object_store() -> None:
    """Storing through the object and by dotted path from the parent give the same memory."""
    sensory_memory = new_memory()
    # store data to memory
    user: MemoryObject = sensory_memory.new_object("user")
    user.set("name", "jhon")  # "jhon" is the seed's spelling throughout this example
    user.set("age", 13)

    # which is equal to
    equal_memory = new_memory()
    # Seed typo: `user.set("user.name", "jhon")` / `user.set("user.age", 13)`; that would create
    # "user.user.name". The intended receiver is the parent memory.
    equal_memory.set("user.name", "jhon")
    equal_memory.set("user.age", 13)

    assert to_dict(sensory_memory) == to_dict(equal_memory) == {"user": {"name": "jhon", "age": 13}}
    assert isinstance(equal_memory.get("user"), MemoryObject)


def test_seed_001_nested_object_retrieve() -> None:
    sensory_memory = new_memory()
    stored: MemoryObject = sensory_memory.new_object("user")
    stored.set("name", "jhon")
    stored.set("age", 13)

    # retrieve data from memory
    user: MemoryObject = sensory_memory.get_object("user")
    name: str = user.get("name")
    age: int = user.get("age")
    assert (name, age) == ("jhon", 13)
    # which is equal to
    name: str = sensory_memory.get("user.name")
    age: int = sensory_memory.get("user.age")
    assert (name, age) == ("jhon", 13)
