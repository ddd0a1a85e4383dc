"""Environments: the contract, the registry and plugins, the sandbox, and the domains."""
