"""Many searches: fleet files, batches and their index, verification of committed configs, comparison."""
