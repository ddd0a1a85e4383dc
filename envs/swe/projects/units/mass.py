"""Masses in grams, kilograms, ounces and pounds, and scaling recipe quantities between servings."""

GRAMS = {"g": 1.0, "kg": 1000.0, "oz": 28.349523125, "lb": 453.59237}


def convert_mass(value, source, target):
    """`value` in unit `source` expressed in `target`, rounded to 3 places."""
    if source not in GRAMS or target not in GRAMS:
        raise ValueError(f"cannot convert {source!r} to {target!r}")
    return round(value * GRAMS[source] / GRAMS[target], 3)


def scale_recipe(ingredients, servings, wanted):
    """{name: (quantity, unit)} for `servings` rescaled to `wanted` servings, quantities rounded to 2 places."""
    if servings <= 0 or wanted <= 0:
        raise ValueError("servings must be positive")
    factor = wanted / servings
    return {name: (round(quantity * factor, 2), unit) for name, (quantity, unit) in ingredients.items()}


def total_grams(items):
    """The summed mass of (value, unit) items in grams, rounded to 1 place."""
    return round(sum(value * GRAMS[unit] for value, unit in items), 1)


def pounds_and_ounces(grams):
    """A mass as (whole pounds, remaining ounces rounded to 1 place)."""
    ounces = grams / GRAMS["oz"]
    pounds = int(ounces // 16)
    return (pounds, round(ounces - pounds * 16, 1))
