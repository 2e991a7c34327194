"""InputOrder: emissions released by input position, each position's in emission order."""

from flink_agents.runtime._input_order import InputOrder


def test_a_later_position_waits_for_an_earlier_open_one_and_then_follows_it():
    order = InputOrder()
    first, second = order.admit(), order.admit()
    order.add(second, "b1")
    order.close(second)
    assert order.release() == []
    order.add(first, "a1")
    assert order.release() == ["a1"]  # nothing before it is missing: out at once
    order.add(first, "a2")
    order.close(first)
    assert order.release() == ["a2", "b1"]
    assert order.released(first) and order.released(second)


def test_a_position_that_emits_nothing_holds_back_only_until_it_closes():
    order = InputOrder()
    silent, loud = order.admit(), order.admit()
    order.add(loud, "x")
    order.close(loud)
    assert order.release() == []
    order.close(silent)
    assert order.release() == ["x"]


def test_flush_releases_everything_held_in_order_and_closes_the_open_positions():
    order = InputOrder()
    first, second, third = order.admit(), order.admit(), order.admit()
    order.add(third, "c")
    order.add(second, "b")
    order.close(third)
    assert order.release() == []
    assert order.flush() == ["b", "c"]
    assert order.released(first) and order.released(third)
    fourth = order.admit()
    order.add(fourth, "d")
    assert order.release() == ["d"] and not order.released(fourth)
