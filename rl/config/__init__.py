"""The typed schema of a run: one pydantic model per section, which a YAML recipe maps onto one to one."""
