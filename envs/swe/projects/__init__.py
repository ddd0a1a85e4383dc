"""Reference sources of the generated SWE packages: one correct, readable package per family."""
