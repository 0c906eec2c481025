"""Shared test helpers: the checkout environment, demo records, the stub LLM server, monitoring samples."""
