"""A request that crashes the engine: its cause line and the engine argument vLLM's trace points at (issue 30).

The crash is the verbatim one of tests/log_samples.py (vLLM 0.32 CPU, a tiny Granite 4.0-H, prefix caching
on); the real run is tests/test_real_vllm_families.py::test_granite4h_crash_names_prefix_caching.
"""

from __future__ import annotations

import dataclasses

from log_samples import SAMPLES

from vllm_fit.advice.engine_hints import crash_hint
from vllm_fit.logs.classify import classify, raising_frame
from vllm_fit.logs.probe_result import ProbeResult
from vllm_fit.outcome import Outcome
from vllm_fit.trial.record import TrialRecord

MAMBA_CRASH = next(sample for sample in SAMPLES if sample.name == "request-time engine crash inside a mamba layer")
SERVED_CRASH = next(sample for sample in SAMPLES if sample.name.endswith("inside a mamba layer, served"))


def _crash_record(sample=MAMBA_CRASH, **args) -> TrialRecord:
    verdict = classify(sample.text, ProbeResult.parse(sample.result))
    return TrialRecord(index=1, llm_kwargs={"max_model_len": 4096, **args}, outcome=verdict.outcome,
                       detail=verdict.detail, duration_s=9.0, length=4096, hint=None, facts=verdict.facts,
                       evidence=tuple(verdict.evidence), phase=verdict.phase)


def test_a_request_crash_names_where_vllm_failed():
    record = _crash_record()
    assert record.outcome is Outcome.CRASH and record.phase == "request"
    assert record.detail == ("the engine crashed serving the full-length request: IndexError: index 16 is"
                             " out of bounds for dimension 0 with size 1 (raised in"
                             " vllm/model_executor/layers/mamba/mamba_mixer2.py:880 (conv_ssm_forward))")


def test_a_served_crash_names_the_engine_cores_root_cause_not_the_http_500():
    record = _crash_record(SERVED_CRASH)
    assert record.outcome is Outcome.CRASH
    assert record.detail == ("the engine crashed serving the full-length request: IndexError: index 8 is"
                             " out of bounds for dimension 0 with size 1 (raised in"
                             " vllm/model_executor/layers/mamba/mamba_mixer2.py:880 (conv_ssm_forward))")
    assert crash_hint([record]) is not None


def test_the_innermost_vllm_frame_is_the_one_named():
    assert raising_frame(['  File "/x/vllm/a.py", line 1, in f', '  File "/x/torch/b.py", line 2, in g',
                          '  File "/x/vllm/v1/c.py", line 3, in h', '  File "/x/torch/d.py", line 4, in k']) \
        == "vllm/v1/c.py:3 (h)"
    assert raising_frame(["no traceback here"]) is None


def test_a_crash_in_a_mamba_layer_with_prefix_caching_on_points_at_it():
    hint = crash_hint([_crash_record()])
    assert hint is not None and hint.argument == "enable_prefix_caching=false"
    assert "mamba_mixer2.py:880 (conv_ssm_forward)" in hint.line and "--explore" in hint.why


def test_no_hint_where_prefix_caching_was_off_or_the_crash_is_elsewhere():
    assert crash_hint([_crash_record(enable_prefix_caching=False)]) is None
    record = _crash_record()
    elsewhere = dataclasses.replace(record, detail=record.detail.replace(
        "model_executor/layers/mamba/mamba_mixer2.py", "v1/worker/gpu_model_runner.py"))
    assert crash_hint([elsewhere]) is None
    assert crash_hint([dataclasses.replace(record, phase="start")]) is None
    assert crash_hint([dataclasses.replace(record, outcome=Outcome.REQUEST_FAILED)]) is None
