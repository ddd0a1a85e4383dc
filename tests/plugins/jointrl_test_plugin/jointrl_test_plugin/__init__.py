"""A jointrl plugin for the tests: the README's word-length env and short_answer reward, and a broken plugin."""
