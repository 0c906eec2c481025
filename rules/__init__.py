"""R_app rule files (JSON) and their JSON Schema; ``default.json`` applies when an app has none."""
