"""Prompts: the template library, the sandbox they render in, and the worker that renders overrides."""
