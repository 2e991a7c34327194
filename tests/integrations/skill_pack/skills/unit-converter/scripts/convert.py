"""Convert a quantity with a factor from references/factors.md."""


def convert(quantity: float, factor: float) -> float:
    return round(quantity * factor, 2)
