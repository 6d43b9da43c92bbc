"""What vLLM prints and what it means (pure): log parsing, classification, per-version capacity rules, phases."""
