"""The HTTP layer: passthrough, search interception, the pipeline API."""
