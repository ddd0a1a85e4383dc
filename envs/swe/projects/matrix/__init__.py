"""Matrix helpers on lists of lists: shapes, products, exact elimination, vectors and grids."""
