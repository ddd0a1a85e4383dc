"""Shipped YAML recipes and model presets (data, read through importlib.resources)."""
