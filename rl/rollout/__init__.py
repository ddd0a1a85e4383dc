"""Rollout: the generation engine, the agent loop, Ray workers and their manager, the pipeline, task sampling, tiers and weight sync."""
