"""Async client for OpenAI-compatible gateway streams."""
