"""Simulated GPUs (TEST DOUBLE): the vendored fakegpu (tests/fakegpu) plays vLLM 0.4-0.34 on NVIDIA GPUs.

worlds.py builds the worlds and the questions asked in them; harness.py runs the real vllm-fit CLI
in a world and scores its answer against the fake's ground truth; baselines.py plays the procedures
people use by hand (walk-down, doubling, blind bisection) against the same memory model.
"""
