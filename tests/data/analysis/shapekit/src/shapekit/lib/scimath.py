import cmath


def sqrt(value: float) -> complex:
    return cmath.sqrt(value)
