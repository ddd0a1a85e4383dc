"""Text tokenization: an expression lexer, word and sentence splitting, vocabularies, RPN and byte-pair merges."""
