"""Writers, one small module per output format (YAML config, JSON report, Markdown, JUnit)."""
