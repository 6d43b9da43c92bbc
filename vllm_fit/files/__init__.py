"""Files the tool writes: atomic writes with normal permissions, checked output paths, private work folders."""
