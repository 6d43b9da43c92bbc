"""`python -m vllm_fit` runs the command line."""

from .cli import main

main()
