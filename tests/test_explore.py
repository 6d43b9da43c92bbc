"""--explore's choice of alternatives (explore.alternatives): what can run here, from the request,
the model and the visible devices. The searches themselves run in test_simulator.py and, for fp8, on
real vLLM in test_real_vllm_models.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from vllm_fit.advice.explore import alternatives


def prepared(engine_args=None, tp=1, visible=1, heads=32, dtype_bytes=2):
    return SimpleNamespace(
        request=SimpleNamespace(engine_args=dict(engine_args or {}), tensor_parallel_size=tp),
        model=SimpleNamespace(dtype_bytes=dtype_bytes, num_attention_heads=heads),
        devices=SimpleNamespace(preflight=SimpleNamespace(visible_count=visible)))


@pytest.mark.parametrize("kwargs, expected", [
    ({}, ["kv_cache_dtype=fp8"]),
    ({"visible": None}, ["kv_cache_dtype=fp8"]),  # no NVML (CPU): no tensor parallelism to try
    ({"visible": 2}, ["kv_cache_dtype=fp8", "tensor_parallel_size=2"]),
    ({"visible": 8}, ["kv_cache_dtype=fp8", "tensor_parallel_size=2", "tensor_parallel_size=4"]),
    ({"visible": 8, "tp": 2}, ["kv_cache_dtype=fp8", "tensor_parallel_size=4", "tensor_parallel_size=8"]),
    ({"visible": 8, "heads": 6}, ["kv_cache_dtype=fp8", "tensor_parallel_size=2"]),  # 4 does not divide 6
    ({"engine_args": {"kv_cache_dtype": "fp8_e5m2"}, "visible": 2}, ["tensor_parallel_size=2"]),
    ({"dtype_bytes": 1}, []),  # an fp8 model's cache is one byte already
])
def test_the_alternatives_that_can_run_here(kwargs, expected):
    assert [a.name for a in alternatives(prepared(**kwargs))] == expected


def test_an_alternative_keeps_the_other_engine_arguments():
    [fp8, tp2] = alternatives(prepared({"enforce_eager": True}, visible=2))
    assert fp8.engine_args == {"enforce_eager": True, "kv_cache_dtype": "fp8"} and fp8.tensor_parallel_size == 1
    assert tp2.engine_args == {"enforce_eager": True} and tp2.tensor_parallel_size == 2
