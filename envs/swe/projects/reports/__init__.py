"""A CSV report builder: parse CSV text, type columns, group and pivot records, render aligned tables."""
