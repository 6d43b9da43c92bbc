"""The side-effect edge: one launch of one candidate, kept as an immutable record."""
