"""Stock levels per SKU: receive and ship goods, find what runs low, value what is on hand."""


class OutOfStock(ValueError):
    """Shipping more of a SKU than is on hand."""


class Inventory:
    """How many units of each SKU are on hand."""

    def __init__(self):
        self.levels = {}

    def receive(self, sku, quantity):
        """Add `quantity` units of `sku`."""
        if quantity < 1:
            raise ValueError(f"quantity must be at least 1, got {quantity}")
        self.levels[sku] = self.levels.get(sku, 0) + quantity

    def ship(self, sku, quantity):
        """Take `quantity` units of `sku` away; shipping more than is on hand is refused."""
        on_hand = self.levels.get(sku, 0)
        if quantity > on_hand:
            raise OutOfStock(f"{sku}: {on_hand} on hand, {quantity} requested")
        self.levels[sku] = on_hand - quantity
        if self.levels[sku] == 0:
            del self.levels[sku]

    def stock(self, sku):
        """Units of `sku` on hand (0 for an unknown SKU)."""
        return self.levels.get(sku, 0)

    def low_stock(self, threshold):
        """SKUs with at most `threshold` units on hand, sorted."""
        return sorted(sku for sku, count in self.levels.items() if count <= threshold)

    def value(self, prices):
        """The worth in cents of what is on hand, given unit prices in cents (unpriced SKUs count 0)."""
        return sum(count * prices.get(sku, 0) for sku, count in self.levels.items())

    def reorder(self, targets):
        """How many units of each SKU to order to reach its target level (only SKUs below target)."""
        return {sku: target - self.stock(sku) for sku, target in sorted(targets.items()) if self.stock(sku) < target}
