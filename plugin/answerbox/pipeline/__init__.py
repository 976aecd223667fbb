"""The search-pipeline engine: definitions, processors, resolution, storage, stats."""
