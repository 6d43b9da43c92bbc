"""The journal, the fit cache, the fingerprint and modelinfo, on their own (no launch)."""

from __future__ import annotations

import json
import sys

import pytest

from vllm_fit.prepare.modelinfo import ModelInfo, derived_max_len, kv_bytes_per_token, sliding_window
from vllm_fit.store import SCHEMA, FitStore, Journal
from vllm_fit.trial.record import TrialRecord


def record(index: int, outcome: str = "ok", length: int = 1024, timeout_s=None) -> TrialRecord:
    return TrialRecord.from_json({"index": index, "engine_args": {"max_model_len": length}, "outcome": outcome,
                                  "detail": "d", "duration_s": 1.0, "max_model_len": length, "max_len_hint": None,
                                  "capacity": {}, "evidence": [], "timeout_s": timeout_s})


def test_a_record_survives_its_json():
    first = record(3, "kv_too_small", 4096)
    assert TrialRecord.from_json(json.loads(json.dumps(first.to_json()))) == first


def test_the_journal_replays_finished_trials_in_order(tmp_path):
    journal = Journal(tmp_path / "j.jsonl", "fp")
    for i, outcome in enumerate(["kv_too_small", "ok"], start=1):
        journal.append(record(i, outcome, 1000 * i))
    assert [(r.index, r.outcome.value, r.length) for r in journal.load()] == [(1, "kv_too_small", 1000),
                                                                             (2, "ok", 2000)]


def test_a_torn_last_line_is_dropped_and_said(tmp_path):
    journal = Journal(tmp_path / "j.jsonl", "fp")
    journal.append(record(1))
    journal.append(record(2))
    text = journal.path.read_text()
    journal.path.write_text(text[: len(text) - 20])  # killed mid-write
    notes = []
    assert [r.length for r in journal.load(note=notes.append)] == [1024]
    assert "1 line(s) not replayed" in notes[0]


def test_a_corrupt_middle_line_is_skipped_and_the_rest_renumbered(tmp_path):
    journal = Journal(tmp_path / "j.jsonl", "fp")
    for i in (1, 2, 3):
        journal.append(record(i, length=100 * i))
    lines = journal.path.read_text().splitlines()
    lines[2] = '{"index": 2, "outcome": "ok"}'  # parses, but is not a trial record
    journal.path.write_text("\n".join(lines) + "\n")
    replayed = journal.load()
    assert [(r.index, r.length) for r in replayed] == [(1, 100), (2, 300)]


def test_a_journal_of_another_schema_or_search_is_ignored(tmp_path):
    path = tmp_path / "j.jsonl"
    path.write_text(json.dumps({"schema": SCHEMA - 1, "fingerprint": "fp"}) + "\n" +
                    json.dumps(record(1).to_json()) + "\n")
    notes = []
    assert Journal(path, "fp").load(note=notes.append) == [] and "another version" in notes[0]
    assert Journal(path, "other").load() == []


def test_timeouts_under_a_shorter_trial_timeout_are_not_replayed(tmp_path):
    journal = Journal(tmp_path / "j.jsonl", "fp")
    journal.append(record(1, "timeout", timeout_s=5.0))
    assert journal.load(trial_timeout_s=5.0) and journal.load(trial_timeout_s=600.0) == []


@pytest.mark.parametrize("content", ["", "{", "[]", "{}", json.dumps({"schema": SCHEMA, "trials": "x"})])
def test_an_unusable_cached_fit_is_a_miss_with_a_note(tmp_path, content):
    store = FitStore(tmp_path)
    (tmp_path / "fits").mkdir()
    (tmp_path / "fits" / "fp.json").write_text(content)
    notes = []
    assert store.cached("fp", notes.append) is None and "searching again" in notes[0]


def test_the_fingerprint_keeps_secrets_out_and_follows_what_changes_the_answer(tmp_path):
    from vllm_fit.fingerprint import fingerprint, fingerprint_inputs
    from vllm_fit.prepare import prepare
    from vllm_fit.prepare.request import request_from_options

    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "num_attention_heads": 4, "num_key_value_heads": 2,
        "num_hidden_layers": 2, "hidden_size": 128, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}))

    def key(*engine_args: str, **options):
        request = request_from_options(dict({"model": str(tmp_path), "engine_args": list(engine_args),
                                             "kv_cache_memory": "1MiB"}, **options), {}, sys.executable)
        inputs = fingerprint_inputs(prepare(request))
        return fingerprint(inputs), json.dumps(inputs, default=str)

    base, text = key("hf_token=secret-value-1")
    assert "secret-value-1" not in text
    assert key("hf_token=secret-value-2")[0] == base  # a token does not change memory use
    assert key("hf_token=secret-value-1", "enforce_eager=true")[0] != base
    assert key("hf_token=secret-value-1", granularity="64")[0] != base
    assert key("hf_token=secret-value-1", trial_timeout="60")[0] == base  # how long to wait is not the answer


def test_modelinfo_reads_lengths_windows_and_kv_cost():
    llama = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
             "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
             "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}}
    assert derived_max_len(llama) == 131072 and kv_bytes_per_token(llama) == 2 * 32 * 8 * 128 * 2
    yarn = dict(llama, max_position_embeddings=32768,
                rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})
    assert derived_max_len(yarn) == 131072
    assert derived_max_len(yarn, (0, 29, 0)) == 131072 and derived_max_len(yarn, (0, 30, 0)) == 32768  # vLLM #56446
    assert sliding_window(dict(llama, sliding_window=4096)) == 4096
    assert sliding_window(dict(llama, sliding_window=131072, use_sliding_window=False)) is None
    # a model-wide window keeps full attention's pages; blocks map to lengths on V0 only
    assert kv_bytes_per_token(dict(llama, sliding_window=4096)) == kv_bytes_per_token(llama)
    assert kv_bytes_per_token(dict(llama, layer_types=["sliding_attention", "full_attention"])) is None
    windowed = ModelInfo(None, 131072, 32, kv_bytes_per_token(llama), None, sliding_window=4096)
    assert windowed.plain_attention(v1=False) and not windowed.plain_attention(v1=True)
    assert ModelInfo(None, 131072, 32, None, None).plain_attention(v1=False) is False
    info = ModelInfo(None, 131072, 32, kv_bytes_per_token(llama), None, num_kv_heads=8, dtype_bytes=2)
    assert info.kv_bytes_per_rank(2) == info.kv_bytes_per_token // 2
    assert info.kv_bytes_per_rank(16) == info.kv_bytes_per_token // 8  # fewer KV heads than ranks: replicated
    assert info.kv_bytes_per_rank(1, {"kv_cache_dtype": "fp8"}) == info.kv_bytes_per_token // 2
    assert info.kv_bytes_per_rank(1, {"kv_cache_dtype": "int3-mystery"}) is None


def test_the_models_maximum_follows_the_installed_vllm(tmp_path):
    """A YaRN x4 model over 32768 positions: 131072 up to vLLM 0.29, 32768 from 0.30 (and for an
    unknown version, which counts as current)."""
    from vllm_fit.prepare.modelinfo import read_model_info

    (tmp_path / "config.json").write_text(json.dumps({
        "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256, "max_position_embeddings": 32768,
        "torch_dtype": "bfloat16", "rope_scaling": {"type": "yarn", "factor": 4.0,
                                                    "original_max_position_embeddings": 32768}}))
    info = read_model_info(str(tmp_path))
    assert info.for_version((0, 28, 0)).derived_max_len == 131072
    assert info.for_version((0, 32, 0)).derived_max_len == 32768
    assert info.for_version(None).derived_max_len == 32768


def test_the_models_maximum_follows_vllms_own_rules():
    """As vLLM's _get_and_verify_max_len: Whisper's key, Command-R's model_max_length over the others,
    the tokenizer's limit when smaller, a boolean as the number it is, no scaling for Gemma3."""
    base = {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256}
    assert derived_max_len(dict(base, max_position_embeddings=4096, max_target_positions=448)) == 448
    assert derived_max_len(dict(base, max_position_embeddings=8192, model_max_length=131072)) == 131072
    assert derived_max_len(dict(base, max_position_embeddings=8192), tokenizer_max=2048.0) == 2048
    assert derived_max_len(dict(base, max_position_embeddings=8192), tokenizer_max=1e30) == 8192
    assert derived_max_len(dict(base, max_position_embeddings=8192, seq_length=True)) == 1
    gemma = dict(base, model_type="gemma3_text", max_position_embeddings=131072,
                 rope_scaling={"rope_type": "linear", "factor": 8.0})
    assert derived_max_len(gemma) == 131072 and derived_max_len(dict(gemma, model_type="llama")) == 1048576
