"""Small string utilities: slugs, identifier case, edit distance, wrapping and word counts."""
