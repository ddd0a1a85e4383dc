"""Serving: the OpenAI-compatible HTTP server (app), the engine thread behind it (scheduler), request checks (protocol) and streamed deltas."""
