"""KV cache groups (issue 20): which layers slide, how vLLM 0.29+ groups them, what a pool holds, and
how a trial's own figures pick the layout. The numbers are real vLLM 0.32 figures from the CPU backend
(tiny models of scripts/make_family_models.py, 32 KiB per layer and block)."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest

from vllm_fit.errors import BadInput
from vllm_fit.logs.capacity import hint_is_exact, layouts_unexplained, max_len_hint
from vllm_fit.logs.kv_groups import (
    Chunk,
    KvLayout,
    State,
    agreed_longest,
    calibrated,
    candidate_layouts,
    cdiv,
    hybrid_layout,
    in_flight_options,
    tokens_line,
)
from vllm_fit.logs.regime import Engine, Regime
from vllm_fit.outcome import CapacityFacts, Outcome
from vllm_fit.prepare.attention import unmodelled_attention
from vllm_fit.prepare.checks import guess_block_size
from vllm_fit.prepare.envcheck import inspect_interpreter
from vllm_fit.prepare.hybrid_layers import (
    ALIGNED_STATE_BLOCKS,
    DELTANET,
    mamba2_groups,
    mamba_state,
    ssm_dtype_bytes,
    state_family,
)
from vllm_fit.prepare.layer_pages import layer_page_shapes
from vllm_fit.prepare.modelinfo import (
    ModelInfo,
    kv_bytes_per_token,
    layer_kv_bytes_per_token,
    layer_windows,
    max_len_source,
    read_model_info,
)
from vllm_fit.prepare.request import request_from_options
from vllm_fit.strategies.base import AUTO, LengthSpace, Observation, bracket
from vllm_fit.strategies.knob import KvModel
from vllm_fit.strategies.length import Predict
from vllm_fit.strategies.pool_line import secant_length
from vllm_fit.trial.record import TrialRecord

V032_CPU = Regime.of("0.32.0", cpu=True)
KV_6MIB = 6 << 20


def test_which_layers_slide_as_the_hub_configs_say():
    assert layer_windows({"model_type": "gemma2", "num_hidden_layers": 4, "sliding_window": 4096}) == (
        4096, None, 4096, None)
    assert layer_windows({"num_hidden_layers": 3, "sliding_window": 512,
                          "layer_types": ["sliding_attention", "sliding_attention", "full_attention"]}) == (
        512, 512, None)
    assert layer_windows({"num_hidden_layers": 6, "sliding_window": 512, "sliding_window_pattern": 3}) == (
        512, 512, None, 512, 512, None)
    qwen2 = {"num_hidden_layers": 4, "sliding_window": 4096, "max_window_layers": 2}
    assert layer_windows({**qwen2, "use_sliding_window": False}) == (None,) * 4
    assert layer_windows({**qwen2, "use_sliding_window": True}) == (None, None, 4096, 4096)
    assert layer_windows({"num_hidden_layers": 2, "sliding_window": 262144}) == (262144, 262144)  # Phi-3
    assert layer_windows({"num_hidden_layers": 2}) == (None, None)
    assert layer_windows({"num_hidden_layers": 2, "layer_types": ["chunked_attention", "full_attention"]}) is None
    assert layer_windows({"num_hidden_layers": "32"}) is None


def test_layer_types_all_full_is_plain_attention():
    """transformers 5 writes layer_types into every config it saves; all full attention is still plain."""
    base = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
            "torch_dtype": "bfloat16"}
    assert kv_bytes_per_token({**base, "layer_types": ["full_attention"] * 2}) == 512
    assert kv_bytes_per_token({**base, "layer_types": ["sliding_attention", "full_attention"]}) is None


def test_groups_as_vllm_forms_them():
    assert hybrid_layout([4096, None]).windows == (4096, None)  # Gemma 2: 1 sliding, 1 full
    gemma3 = hybrid_layout([512] * 5 + [None])  # 5:1: the group size is the one full layer
    assert gemma3.layers_per_group == 1 and gemma3.windows.count(512) == 5
    gpt_oss_eagle = hybrid_layout([128] * 12 + [None] * 13)  # 13 < 1.5 x 12: padded to 13 a group
    assert gpt_oss_eagle.layers_per_group == 13 and sorted(map(str, gpt_oss_eagle.windows)) == ["128", "None"]


def test_what_a_pool_holds_matches_real_vllm():
    """Measured on vLLM 0.32 (CPU, LLM: 4096 tokens in flight): Phi-3's 40 blocks start and serve 4864
    (4865 is refused with "estimated maximum model length is 4864"); Gemma 2's 80 blocks hold 4992."""
    phi3 = KvLayout((262144,), 2, "all-sliding")
    assert phi3.longest_held(40, 128, 4096) == 4864
    gemma2 = hybrid_layout([4096, None])
    assert gemma2.longest_held(80, 128, 4096) == 4992
    assert gemma2.least_blocks(4000, 128, 2048) == 66  # 33 sliding + 32 full + the null block


def test_a_trials_figures_pick_the_layout():
    """Phi-3's auto-fit start: 40 blocks, "CPU KV cache size: 4,964 tokens" at 4096 = int(40 / 33 x 4096):
    the sliding layout (33 blocks a request) fits the figure, full attention (32) does not."""
    layouts = candidate_layouts((262144, 262144))
    pairs = calibrated(layouts, in_flight_options(4096, cpu=True), 128, 40, 4096, 4964, 1.21)
    assert [layout.name for layout, _ in pairs] == ["all-sliding"]
    assert agreed_longest(pairs, 128, 40) == 4864
    # Gemma 2 at 80 blocks: "5,055 tokens" at 4992 = int(80 / 79 x 4992)
    pairs = calibrated(candidate_layouts((4096, None)), in_flight_options(4096, cpu=True), 128, 80, 4992, 5055, 1.01)
    assert [layout.name for layout, _ in pairs] == ["hybrid"] and agreed_longest(pairs, 128, 80) == 4992


def test_layouts_that_disagree_give_no_length():
    """On a GPU the tokens in flight may be 1x or 2x max_num_batched_tokens (async scheduling): where a
    short trial cannot tell them apart and they hold different lengths, nothing is read off the pool."""
    layouts = (hybrid_layout([512, None]),)
    pairs = calibrated(layouts, in_flight_options(2048, cpu=False), 16, 1000, 256, None, 1000 / 33)
    assert len(pairs) == 2
    assert agreed_longest(pairs, 16, 1000) is None


def test_the_hint_of_an_autofit_that_kept_a_short_default_is_its_pool():
    """The Phi-3 case: vLLM's default for LongRoPE is original_max_position_embeddings (4096), and auto-fit
    said "full model context length 4096 fits": that proves nothing above 4096; the pool holds 4864."""
    facts = CapacityFacts(kv_cache_tokens=4964, max_concurrency=1.21, concurrency_len=4096, num_blocks=40,
                          block_size=128, autofit_len=4096, autofit_from=4096, autofit_reduced=False,
                          max_num_batched_tokens=4096)
    layouts = candidate_layouts((262144, 262144))
    assert max_len_hint(Outcome.OK, facts, V032_CPU, 128, plain_attention=False) is None
    assert max_len_hint(Outcome.OK, facts, V032_CPU, 128, plain_attention=False, layouts=layouts) == 4864
    assert hint_is_exact(Outcome.OK, facts, V032_CPU, False, layouts)
    assert not hint_is_exact(Outcome.OK, facts, V032_CPU, False, ())


V028_CPU = Regime.of("0.28.0", cpu=True)


@pytest.mark.parametrize("spans, length, tokens, served", [
    ((4096, None), 16128, 16212, 16129),  # Gemma 2: 16128 served, 16144 hung at the request
    ((512,) * 5 + (None,), 3840, 3985, 3968),  # Gemma 3: 3968 served, 3984 refused at the start
    ((Chunk(512),) * 3 + (None,), 10624, 10679, 10625),  # Llama 4: 10624 served, 10640 hung
    ((State(),) * 2 + (None, State()), 24064, 24189, 24065),  # Granite 4.0-H: 24065 served, 24066 hung
])
def test_a_pool_before_0_29_holds_the_prompt_beside_the_null_block(spans, length, tokens, served):
    """vLLM 0.28 (CPU, LLM, 6 MiB: 192 blocks of 128 tokens, 4096 in flight): the start check counts the
    length in every block, the full-length request its L - 1 prompt tokens beside the null block; the
    trial's token figure picks the layout, whose limit is then exact (measured: scripts/boundary.py)."""
    facts = CapacityFacts(kv_cache_tokens=tokens, concurrency_len=length, num_blocks=192, block_size=128,
                          in_flight_tokens=4096)
    layouts = candidate_layouts(spans, state_blocks=(1,))
    assert max_len_hint(Outcome.OK, facts, V028_CPU, 128, plain_attention=False, layouts=layouts) == served
    assert hint_is_exact(Outcome.OK, facts, V028_CPU, False, layouts)


@pytest.mark.parametrize("estimate, served", [(16256, 16129), (3968, 3968), (10752, 10625), (24192, 24065)])
def test_a_too_long_error_before_0_29_gives_a_length_that_serves(estimate, served):
    """vLLM 0.28's estimate (Gemma 2, Gemma 3, Llama 4, Granite 4.0-H at 6 MiB, the same measurements)
    ends a block and ignores the null block: one block shorter plus the prompt's token always serves,
    and is the limit where one full-attention group grows with the length; it is never called exact."""
    facts = CapacityFacts(estimated_max_len=estimate, error_max_model_len=32768)
    hint = max_len_hint(Outcome.KV_TOO_SMALL, facts, V028_CPU, 128, plain_attention=False)
    assert hint == estimate - 127 and hint <= served
    assert not hint_is_exact(Outcome.KV_TOO_SMALL, facts, V028_CPU, False)


@pytest.mark.parametrize("version, plain, none_fits", [("0.32.0", False, True), ("0.32.0", True, True),
                                                       ("0.9.2", False, True), ("0.9.0", True, False),
                                                       ("0.7.3", False, False)])
def test_a_too_long_error_without_an_estimate_says_no_length_fits_from_0_9_1(version, plain, none_fits):
    """From 0.9.1 vLLM appends "the estimated maximum model length is N" whenever N > 0 (kv_cache_utils,
    0.9.1-0.34); without it not one token fits the pool, whatever the layout (a state hybrid's state
    blocks do not scale with the length: a linear reading pointed at 512 where nothing fits). Before
    0.9.1 no estimate is printed at all (0.8.4-0.9.0 drop the number), so its absence says nothing there:
    the printed sizes are scaled (65536 x 0.02 / 2.5 tokens, less their rounding)."""
    facts = CapacityFacts(error_max_model_len=65536, needed_kv_gib=2.5, error_available_kv_gib=0.02)
    regime = Regime.of(version, Engine.V1)
    hint = max_len_hint(Outcome.KV_TOO_SMALL, facts, regime, 16, plain_attention=plain)
    assert (hint == 0) if none_fits else (hint is not None and 300 < hint < 530)
    assert not hint_is_exact(Outcome.KV_TOO_SMALL, facts, regime, plain)


V026_CPU = Regime.of("0.26.0", cpu=True)


@pytest.mark.parametrize("in_flight, served", [(2048, 11009), (4096, 3968)])
def test_before_0_29_a_fixed_kv_sizes_length_is_known_before_a_launch(in_flight, served):
    """vLLM 0.26 (CPU), the tiny Gemma 3 at 6 MiB (192 pages of 32 KiB, groups of one layer): served (2048
    tokens in flight) 11009 serves and 11010 hangs at the request; offline (4096) 3968 starts and 3969 is
    refused (scripts/boundary.py, 2026-12-06). The layout gives both before any launch, in the version's
    rules: one launch, where the first had been the model's maximum (a too-long start, then one or two more)."""
    model = KvModel(None, None, V026_CPU, guess_block_size=128, plain=False,
                    layout=candidate_layouts((512,) * 5 + (None,))[0], layer_bytes_per_token=256,
                    in_flight_guess=in_flight)
    assert model.length_for_bytes(6 << 20, 1, 32768, 1) == served


def test_before_0_29_a_prompt_within_its_window_straddles_no_block():
    """The tiny Gemma 2 (a 4096 window beside a full layer) for 4000 tokens offline: vLLM 0.26 starts with 65
    blocks (2080 KiB; its start figure: 32 + 33) and serves the 3999-token prompt in 32 blocks a group beside
    the null block; 64 are refused (boundary.py). The tool answered 66 (2112 KiB, 0.29+'s least) as least
    before. From 0.29 the start check counts the null block too: 66, measured on 0.32."""
    gemma2 = candidate_layouts((4096, None))[0]
    assert gemma2.running_blocks(3999, 128, 4096) == 64 and gemma2.request_blocks(3999, 128, 4096) == 65
    assert gemma2.least_blocks(4000, 128, 4096, null_block_in_start_check=False) == 65
    assert gemma2.least_blocks(4000, 128, 4096) == 66
    model = KvModel(None, None, V026_CPU, guess_block_size=128, plain=False, layout=gemma2,
                    layer_bytes_per_token=256, in_flight_guess=4096)
    assert model.need_bytes(4000, []) == 65 * 32768
    # a prompt longer than its window and one step's tokens may straddle a block: 0.28's Gemma 2 served 16129
    assert gemma2.longest_held(192, 128, 4096, null_block_in_start_check=False) == 16129


def _space(highest: int = 32768) -> LengthSpace:
    return LengthSpace(1, highest, 1)


def test_an_autofit_default_below_the_upper_bound_is_a_candidate_not_a_proof():
    autofit = Observation(requested=AUTO, length=4096, outcome=Outcome.OK, pool_at=4096)
    assert Predict(_space(), use_autofit=True).propose([autofit]) == 4097  # the next candidate up, not "done"
    pooled = Observation(requested=AUTO, length=4096, outcome=Outcome.OK, hint=4864, pool_at=4096)
    assert Predict(_space(), use_autofit=True).propose([pooled]) == 4864


def test_a_fixed_kv_size_makes_vllms_estimate_a_ceiling():
    """Phi-3 with --max-len 32767 at a fixed KV size: every failure said 4864; it is launched and proven."""
    failed = Observation(requested=32767, length=32767, outcome=Outcome.KV_TOO_SMALL, hint=4864,
                         fixed_pool_bound=4864)
    strategy = Predict(_space(32767))
    assert strategy.propose([failed]) == 4864
    served = Observation(requested=4864, length=4864, outcome=Outcome.OK)
    assert strategy.propose([failed, served]) is None


def test_after_a_verified_fit_the_search_gallops_up_instead_of_bisecting_from_the_maximum():
    """No number bounds the lengths above a fit (a window on V1, a layout not pinned down): the next
    candidate up, then steps that double."""
    space = LengthSpace(1, 32768, 128)
    top = Observation(requested=32768, length=32768, outcome=Outcome.KV_TOO_SMALL)
    fit = Observation(requested=4864, length=4864, outcome=Outcome.OK)
    strategy = Predict(space)
    assert strategy.propose([top, fit]) == 4992
    again = Observation(requested=4992, length=4992, outcome=Outcome.OK)
    assert strategy.propose([top, fit, again]) == 4992 + 256
    over = Observation(requested=4992 + 256, length=4992 + 256, outcome=Outcome.KV_TOO_SMALL)
    assert strategy.propose([top, fit, again, over]) == 5120


def test_the_maximums_source_is_named():
    assert max_len_source({"max_position_embeddings": 32768}, None) == "config.json's max_position_embeddings (32768)"
    assert "tokenizer_config.json" in max_len_source({"max_position_embeddings": 32768}, 2048)


PHI3_AUTOFIT_LOG = """\
(MainProcess pid=3110) INFO 12-04 17:17:27 [scheduler.py:307] Chunked prefill is enabled with max_num_batched_tokens=4096.
(EngineCore pid=3132) INFO 12-04 17:17:37 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: model='phi3', max_seq_len=4096
(EngineCore pid=3132) INFO 12-04 17:17:51 [kv_cache_utils.py:2468] Auto-fit max_model_len: full model context length 4096 fits in available KV cache memory (0.0 GiB CPU)
(EngineCore pid=3132) INFO 12-04 17:17:51 [kv_cache_utils.py:2327] CPU KV cache size: 4,964 tokens, Maximum concurrency for 4,096 tokens per request: 1.21x
"""  # noqa: E501 (real vLLM 0.32 lines of the issue's Phi-3 trial, kept verbatim)


def test_the_real_phi3_autofit_trial_points_at_4864_not_4096():
    """The issue's first trial, as vLLM 0.32 printed it: the record's hint is the pool's 4864, exact; the
    search launches it next instead of stopping at vLLM's default length."""
    from vllm_fit.logs.kv_groups import candidate_layouts as layouts_of
    from vllm_fit.logs.probe_result import ProbeResult
    from vllm_fit.trial.record import TrialContext, record_from_run
    from vllm_fit.trial.runner import ProcessRun

    result = {"status": "ok", "phase": "request", "versions": {"vllm": "0.32.0"},
              "engine": {"num_gpu_blocks": 40, "block_size": 128, "max_model_len": 4096},
              "request": {"total_tokens": 4096, "expected_tokens": 4096, "served_tokens": [4096]}}
    context = TrialContext("0.32.0", 128, plain_attention=False, kv_bytes_fixed=True, cpu=True,
                           sliding_window=262144, layouts=layouts_of((262144, 262144)))
    run = ProcessRun([], PHI3_AUTOFIT_LOG, ProbeResult.parse(result), 0, False, 58.0, "request")
    record = record_from_run(1, {"model": "phi3", "max_model_len": AUTO, "kv_cache_memory_bytes": 2621440}, run,
                             context)
    assert record.outcome is Outcome.OK and record.length == 4096
    assert record.hint == 4864 and record.hint_exact
    assert Predict(_space(), use_autofit=True).propose([record.observation()]) == 4864


SCOUT_TEXT = {"model_type": "llama4_text", "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8,
              "head_dim": 128, "attention_chunk_size": 8192, "no_rope_layers": [], "torch_dtype": "bfloat16"}
"""meta-llama/Llama-4-Scout-17B-16E-Instruct's text_config, its attention keys as published (an empty
no_rope_layers: transformers fills in one NoPE layer every 4)."""


def test_llama4_chunks_three_layers_of_four_as_vllm_does():
    """vLLM's llama4.py: chunked local attention on the RoPE layers, full attention on the NoPE ones; the
    config is not plain attention, and the 3:1 buckets make one-layer groups (issue 30)."""
    chunk = Chunk(8192)
    spans = layer_windows({"model_type": "llama4", "text_config": SCOUT_TEXT})
    assert spans == (chunk, chunk, chunk, None) * 12
    assert kv_bytes_per_token(SCOUT_TEXT) is None
    assert layer_windows({**SCOUT_TEXT, "no_rope_layers": [1, 0] * 24}) == (chunk, None) * 24
    assert layer_windows({**SCOUT_TEXT, "layer_types": ["chunked_attention", "full_attention"] * 24}) == (
        chunk, None) * 24
    assert layer_windows({**SCOUT_TEXT, "model_type": "other"}) is None  # its rules are not known here
    layout = hybrid_layout(spans)
    assert layout.layers_per_group == 12 and layout.windows.count(chunk) == 3 and layout.windows.count(None) == 1
    assert unmodelled_attention(SCOUT_TEXT) is None


def test_what_a_chunked_pool_holds_matches_real_vllm():
    """The tiny Llama 4 (4 layers, chunk 512) at 6 MiB = 192 one-layer pages on vLLM 0.32 (CPU): a chunked
    group holds at most cdiv(512 + tokens in flight, 128) blocks, so LLM (4096 in flight) serves 10624 and
    `vllm serve` (2048) 16768; vLLM refused 10625 and 16769 ("estimated maximum model length is ...")."""
    layout = hybrid_layout((Chunk(512),) * 3 + (None,))
    assert layout.longest_held(192, 128, 4096) == 10624
    assert layout.longest_held(192, 128, 2048) == 16768
    assert layout.least_blocks(8000, 128, 4096) == 172  # 3 x 36 + 63 + the null block
    # the trial's own figures ("CPU KV cache size: 10,679 tokens" at 10624) keep this layout only
    pairs = calibrated(candidate_layouts((Chunk(512),) * 3 + (None,)), in_flight_options(4096, cpu=True), 128,
                       192, 10624, 10679, 1.01)
    assert [layout.name for layout, _ in pairs] == ["hybrid"] and agreed_longest(pairs, 128, 192) == 10624


DEEPSEEK_V2_LITE = {"model_type": "deepseek_v2", "num_hidden_layers": 27, "num_attention_heads": 16,
                    "num_key_value_heads": 16, "kv_lora_rank": 512, "q_lora_rank": None, "qk_rope_head_dim": 64,
                    "qk_nope_head_dim": 128, "v_head_dim": 128, "torch_dtype": "bfloat16"}
"""deepseek-ai/DeepSeek-V2-Lite's attention keys as published."""


def test_mla_caches_one_latent_per_token_and_layer():
    """vLLM's MLAAttentionSpec: one head of kv_lora_rank + qk_rope_head_dim, no separate value, the same on
    every tensor-parallel rank; from 0.7.1, unless VLLM_MLA_DISABLE=1 (issue 30)."""
    assert layer_kv_bytes_per_token(DEEPSEEK_V2_LITE) == 576 * 2
    assert kv_bytes_per_token(DEEPSEEK_V2_LITE) == 27 * 576 * 2
    assert unmodelled_attention(DEEPSEEK_V2_LITE) is None
    info = ModelInfo(None, 32768, 16, 27 * 1152, None, num_kv_heads=16, dtype_bytes=2, layer_kv_bytes_per_token=1152,
                     latent_attention=True)
    assert info.kv_bytes_per_rank(8) == 27 * 1152 and info.layer_kv_bytes_per_rank(8) == 1152
    assert info.kv_bytes_per_rank(8, {"kv_cache_dtype": "fp8"}) == 27 * 576
    for old in (info.for_version((0, 6, 6)), info.for_version((0, 32, 0), {"VLLM_MLA_DISABLE": "1"})):
        assert old.kv_bytes_per_token is None and "MLA" in (old.unmodelled_attention or "")
    assert info.for_version((0, 32, 0), {"VLLM_MLA_DISABLE": "0"}).kv_bytes_per_token == 27 * 1152
    sparse = {**DEEPSEEK_V2_LITE, "model_type": "deepseek_v32", "index_topk": 2048}  # an indexer cache beside it
    assert kv_bytes_per_token(sparse) is None and "deepseek_v32" in (unmodelled_attention(sparse) or "")
    assert V032_CPU.default_block_size(mla=True) == 16 and V032_CPU.default_block_size() == 128


LONGCAT_FLASH = {"model_type": "longcat_flash", "num_layers": 28, "num_attention_heads": 64, "kv_lora_rank": 512,
                 "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
                 "torch_dtype": "bfloat16", "max_position_embeddings": 131072}
"""meituan-longcat/LongCat-Flash-Chat's attention keys as published: decoder layers as num_layers only."""
MINICPM3_4B = {"model_type": "minicpm3", "num_hidden_layers": 62, "hidden_size": 2560, "num_attention_heads": 40,
               "num_key_value_heads": 40, "kv_lora_rank": 256, "q_lora_rank": 768, "qk_rope_head_dim": 32,
               "qk_nope_head_dim": 64, "v_head_dim": 64, "torch_dtype": "bfloat16"}
"""openbmb/MiniCPM3-4B's attention keys."""


def test_longcat_caches_two_latents_in_each_decoder_layer():
    """vLLM's longcat_flash.py: two MLA sublayers in each of the num_layers decoder layers, as transformers'
    num_hidden_layers = 2 x num_layers counts them; a num_hidden_layers in the file is that count already.
    Before: unmodelled (auto-fit, then one step above; the least KV refused)."""
    assert kv_bytes_per_token(LONGCAT_FLASH) == 56 * 576 * 2 and unmodelled_attention(LONGCAT_FLASH) is None
    assert layer_windows(LONGCAT_FLASH) == (None,) * 56
    assert kv_bytes_per_token({**LONGCAT_FLASH, "num_hidden_layers": 56}) == 56 * 1152
    assert kv_bytes_per_token({**LONGCAT_FLASH, "model_type": "axk1", "num_hidden_layers": 61}) == 61 * 1152
    sparse = {**LONGCAT_FLASH, "index_topk": 2048}  # LongCat's sparse (LSA) variant: an indexer cache beside it
    assert kv_bytes_per_token(sparse) is None and "longcat_flash" in (unmodelled_attention(sparse) or "")


def test_minicpm3_caches_full_keys_and_values_at_the_query_key_width():
    """vLLM's minicpm3.py: MLA's projections, but an Attention of qk_nope + qk_rope = 96 per head with every
    head a KV head, values padded to it; V1 only (V0 sized its blocks by hidden / heads = 64, and the tool
    keeps vLLM's own numbers there). Measured: the tiny MiniCPM3's 1152 in 2.5 MiB (real test)."""
    assert layer_kv_bytes_per_token(MINICPM3_4B) == 2 * 40 * 96 * 2
    assert kv_bytes_per_token(MINICPM3_4B) == 62 * 2 * 40 * 96 * 2 and unmodelled_attention(MINICPM3_4B) is None
    narrow = {**MINICPM3_4B, "num_key_value_heads": 8}  # not read: every head is cached
    assert layer_kv_bytes_per_token(narrow) == 2 * 40 * 96 * 2
    info = ModelInfo(None, 32768, 40, 62 * 15360, None, num_kv_heads=40, dtype_bytes=2,
                     layer_kv_bytes_per_token=15360, model_type="minicpm3")
    assert info.kv_bytes_per_rank(2) == 62 * 15360 // 2  # heads split across ranks
    assert info.for_version((0, 32, 0)).kv_bytes_per_token == 62 * 15360
    for v0 in (info.for_version((0, 6, 3)), info.for_version((0, 9, 2), {"VLLM_USE_V1": "0"})):
        assert v0.kv_bytes_per_token is None and "V0" in (v0.unmodelled_attention or "")
    assert info.for_version((0, 9, 2)).kv_bytes_per_token == 62 * 15360


GRANITE_4_H_MICRO = {"model_type": "granitemoehybrid", "num_hidden_layers": 40, "hidden_size": 2048,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "mamba_n_heads": 64, "mamba_d_head": 64,
                     "mamba_d_state": 128, "mamba_n_groups": 1, "mamba_d_conv": 4, "mamba_expand": 2,
                     "torch_dtype": "bfloat16",
                     "layer_types": (["mamba"] * 5 + ["attention"] + ["mamba"] * 4) * 4}
"""ibm-granite/granite-4.0-h-micro's attention and mamba keys as published (attention at 5, 15, 25, 35)."""


def test_granite_mamba_layers_hold_their_state_whatever_the_length():
    """vLLM 0.32 (granitemoehybrid.py, mamba2_state_shape): 36 mamba layers and 4 attention layers make
    groups of 4: nine groups of one state block a request (three with prefix caching on), one of attention
    (issue 30)."""
    spans = layer_windows(GRANITE_4_H_MICRO)
    assert spans is not None and spans.count(None) == 4 and spans.count(State()) == 36
    assert kv_bytes_per_token(GRANITE_4_H_MICRO) is None and unmodelled_attention(GRANITE_4_H_MICRO) is None
    assert mamba_state(GRANITE_4_H_MICRO) == (3 * (4096 + 2 * 128) * 2, 64 * 64 * 128)
    off, on = candidate_layouts(spans, (1, 3))
    assert off.layers_per_group == 4 and off.windows.count(State(1)) == 9 and off.windows.count(None) == 1
    assert off.request_blocks(100_000, 528, 8192) == 9 + 190 and on.request_blocks(100_000, 528, 8192) == 27 + 190
    # the tiny Granite of the real tests: 192 pages of 32 KiB serve 24064 with prefix caching off, 23296 on
    tiny = candidate_layouts((State(),) * 2 + (None, State()), (1, 3))
    assert [layout.longest_held(192, 128, 4096) for layout in tiny] == [24064, 23296]
    assert unmodelled_attention({**GRANITE_4_H_MICRO, "model_type": "qwen3_next"}) == "layer types attention, mamba"


def test_vllm_raises_the_attention_block_to_hold_a_mamba_state():
    """platforms/interface.py `_align_hybrid_block_size`: the block grows in kernel-block steps until one
    attention page holds a state: 528 tokens on a GPU (bf16 state, 16-token steps), 1152 on a CPU with
    AVX-512 BF16 (float32 SSM state, 128-token steps); measured: the tiny wide Granite's 640."""
    info = ModelInfo(None, 131072, 32, None, None, num_kv_heads=8, dtype_bytes=2, layer_kv_bytes_per_token=2048,
                     mamba_state=mamba_state(GRANITE_4_H_MICRO))
    gpu = Regime.of("0.32.0", cpu=False)
    request = request_from_options({"model": "m"}, {}, "python")
    assert guess_block_size(request, gpu, info) == 528
    wide = ModelInfo(None, 32768, 4, None, None, num_kv_heads=2, dtype_bytes=2, layer_kv_bytes_per_token=256,
                     mamba_state=(3 * (256 + 256) * 2, 8 * 32 * 128))
    fp32 = request_from_options({"model": "m", "engine_args": ["mamba_ssm_cache_dtype=float32"]}, {}, "python")
    assert guess_block_size(fp32, V032_CPU, wide) == 640



def test_a_mamba2_state_split_across_more_ranks_than_groups_holds_whole_groups():
    """vLLM's mamba2_state_shape raises the B/C groups to the tensor-parallel size where it does not divide
    them (extra_groups_for_head_shards): Granite's one group becomes two at TP 2, so each rank's conv state
    holds one group's 1536 bytes more than a half share, and a state that half shares would fit in 32
    blocks of 16 takes 33 (528 tokens). Where the groups divide, a half share is exact (512)."""
    assert mamba2_groups(GRANITE_4_H_MICRO) == (1, 3 * 2 * 128 * 2)
    assert mamba2_groups(QWEN3_NEXT) == (0, 0)
    tp2 = request_from_options({"model": "m", "tensor_parallel_size": "2"}, {}, "python")
    gpu = Regime.of("0.32.0", cpu=False)
    info = ModelInfo(None, 131072, 32, None, None, num_kv_heads=8, dtype_bytes=2, layer_kv_bytes_per_token=2048,
                     mamba_state=(3 * (4096 + 256) * 2, 511232), mamba_groups=(1, 1536))
    assert guess_block_size(tp2, gpu, info) == 528
    assert guess_block_size(tp2, gpu, dataclasses.replace(info, mamba_groups=(2, 1536))) == 512


QWEN3_NEXT = {"model_type": "qwen3_next", "num_hidden_layers": 48, "num_attention_heads": 16,
              "num_key_value_heads": 2, "head_dim": 256, "full_attention_interval": 4, "linear_conv_kernel_dim": 4,
              "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_num_key_heads": 16,
              "linear_num_value_heads": 32, "torch_dtype": "bfloat16"}
"""Qwen/Qwen3-Next-80B-A3B-Instruct's attention and gated DeltaNet keys as published (no layer_types)."""


def test_qwen3_next_gated_deltanet_layers_are_state_layers():
    """transformers fills in full attention every full_attention_interval-th layer; vLLM's
    gated_delta_net_state_shape gives the conv and recurrent states; 36 + 12 layers make three state
    groups of 12 and one full group. With prefix caching on, vLLM 0.32 keeps 2 blocks a request in each."""
    spans = layer_windows(QWEN3_NEXT)
    assert spans == (State(), State(), State(), None) * 12
    assert kv_bytes_per_token(QWEN3_NEXT) is None and unmodelled_attention(QWEN3_NEXT) is None
    assert mamba_state(QWEN3_NEXT) == (3 * (2 * 16 * 128 + 32 * 128) * 2, 32 * 128 * 128)
    layout = candidate_layouts(spans, (2,))[0]
    assert layout.layers_per_group == 12 and layout.windows.count(State(2)) == 3
    # the tiny Qwen3-Next of the real tests: 38 blocks of 640 tokens hold 19840 (prefix caching on), 21760 off
    tiny = candidate_layouts((State(),) * 3 + (None,), (2, 1))
    assert [layout.longest_held(38, 640, 4096) for layout in tiny] == [19840, 21760]


OLMO_HYBRID = {"model_type": "olmo_hybrid", "num_hidden_layers": 32, "hidden_size": 3840, "num_attention_heads": 30,
               "num_key_value_heads": 30, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 96,
               "linear_value_head_dim": 192, "linear_num_key_heads": 30, "linear_num_value_heads": 30,
               "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 8, "dtype": "bfloat16"}
"""transformers 5.19's OlmoHybridConfig defaults (no head_dim key: hidden_size / heads), the keys vLLM 0.32's
olmo_hybrid.py reads."""


def test_a_gated_deltanet_hybrid_is_known_by_its_keys_whatever_its_model_type():
    """OLMo hybrid and MiniCPM-V 4.6's language model size their linear layers with vLLM's
    gated_delta_net_state_shape from the five keys Qwen3-Next uses, and name them in layer_types: the same
    layout (24 state layers in three groups of 8, 2 blocks a request each with prefix caching on) rather
    than vLLM's own fit and a proof. Their GDN kernels need triton (vLLM 0.32 on this CPU: "module 'triton'
    has no attribute 'set_allocator'"), so this is the reading only, checked against vLLM's formula."""
    spans = layer_windows(OLMO_HYBRID)
    assert spans == (State(), State(), State(), None) * 8
    assert state_family(OLMO_HYBRID) == DELTANET and unmodelled_attention(OLMO_HYBRID) is None
    assert mamba_state(OLMO_HYBRID) == (3 * (2 * 30 * 96 + 30 * 192) * 2, 30 * 192 * 96)
    layout = candidate_layouts(spans, (ALIGNED_STATE_BLOCKS[DELTANET],))[0]
    assert layout.layers_per_group == 8 and layout.windows.count(State(2)) == 3
    renamed = {**OLMO_HYBRID, "model_type": "some_future_hybrid"}
    assert state_family(renamed) == DELTANET and layer_windows(renamed) == spans
    # a layer type that is not linear or full attention, or a key missing: not this layout
    odd = {**OLMO_HYBRID, "layer_types": ["mamba"] * 3 + ["full_attention"]}
    assert state_family(odd) is None and unmodelled_attention(odd) == "layer types mamba"
    partial = {key: value for key, value in OLMO_HYBRID.items() if key != "linear_conv_kernel_dim"}
    assert state_family(partial) is None and unmodelled_attention(partial) == "layer types linear_attention"


def test_hybrids_it_cannot_cost_are_never_plain_attention():
    """A config that says some layers are not attention (Nemotron-H's pattern, Zamba2's block types) gets no
    KV cost from config.json, and the least-KV question names it (issue 30)."""
    nemotron = {"model_type": "nemotron_h", "num_hidden_layers": 4, "num_attention_heads": 4,
                "num_key_value_heads": 2, "head_dim": 32, "hybrid_override_pattern": "M-M*"}
    assert kv_bytes_per_token(nemotron) is None
    assert unmodelled_attention(nemotron) == "state or hybrid layers (hybrid_override_pattern) of model type nemotron_h"
    assert kv_bytes_per_token({**QWEN3_NEXT, "model_type": "qwen3_5"}) is None


def test_a_hybrid_it_cannot_cost_gets_no_layout_either(tmp_path):
    """MiniMax-Text-01 (lightning attention on seven layers of eight, softmax on the eighth, named by
    attn_type_list; its keys as MiniMaxAI's config names them): no layer spans, so no KV cache groups and no
    first length from a fixed KV size. A tiny Zamba2's four layers, before Zamba2 was costed, were laid out
    as full attention: a first length of 2944 where 5504 serves, and 14 launches (issue 30). (Jamba was
    this example until its mamba layers were costed.)"""
    config = {"model_type": "minimax", "num_hidden_layers": 8, "hidden_size": 6144, "num_attention_heads": 64,
              "num_key_value_heads": 8, "head_dim": 128, "attn_type_list": [0, 0, 0, 0, 0, 0, 0, 1],
              "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    info = read_model_info(str(tmp_path))
    assert info.unmodelled_attention == "state or hybrid layers (attn_type_list) of model type minimax"
    assert info.layer_windows is None and info.kv_bytes_per_token is None
    assert not info.plain_attention(True) and not info.plain_attention(False)


ZAMBA2_1_2B = {"model_type": "zamba2", "num_hidden_layers": 38, "hidden_size": 2048, "num_attention_heads": 16,
               "num_key_value_heads": 16, "n_mamba_heads": 64, "mamba_d_state": 128, "mamba_ngroups": 1,
               "mamba_d_conv": 4, "mamba_expand": 2, "num_mem_blocks": 2, "torch_dtype": "bfloat16",
               "layers_block_type": (["mamba"] * 5 + ["hybrid"]) * 6 + ["mamba"] * 2}
"""A Zamba2 config in transformers' Zamba2Config keys, sized like Zyphra's 1.2B (written here, not copied from the
hub: no hub file was at hand); no attention_head_dim or mamba_headdim, which transformers derives: 38 layers, six
of them hybrid."""


def test_zamba2_keeps_a_state_in_every_layer_and_kv_beside_each_hybrid_one():
    """vLLM's zamba2.py: a mamba2 mixer in every layer (the hybrid ones too), one attention cache per hybrid
    layer with as many KV heads as query heads, attention_head_dim = 2 x hidden / heads and mamba_headdim =
    expand x hidden / mamba heads where config.json names none (as transformers derives them)."""
    spans = layer_windows(ZAMBA2_1_2B)
    assert spans is not None and spans.count(State()) == 38 and spans.count(None) == 6
    assert kv_bytes_per_token(ZAMBA2_1_2B) is None and unmodelled_attention(ZAMBA2_1_2B) is None
    assert layer_kv_bytes_per_token(ZAMBA2_1_2B) == 2 * 16 * 256 * 2
    assert mamba_state(ZAMBA2_1_2B) == (3 * (4096 + 2 * 128) * 2, 64 * 64 * 128)
    assert layer_windows({**ZAMBA2_1_2B, "layers_block_type": ["mamba", "hybrid"]}) is None  # not 38 entries
    layout = candidate_layouts(spans, (1,))[0]
    assert layout.layers_per_group == 6 and layout.windows.count(State(1)) == 7 and layout.windows.count(None) == 1
    # the tiny Zamba2 of the real tests: 48 blocks of one 128 KiB page serve 5504 (4 state groups of one layer)
    tiny = {**ZAMBA2_1_2B, "num_hidden_layers": 4, "hidden_size": 128, "num_attention_heads": 4, "n_mamba_heads": 8,
            "layers_block_type": ["mamba", "hybrid", "mamba", "mamba"]}
    assert layer_kv_bytes_per_token(tiny) == 1024
    assert candidate_layouts(layer_windows(tiny), (1,))[0].longest_held(48, 128, 4096) == 5504


def test_qwen3_5_text_has_the_same_deltanet_layers():
    """Qwen3.5's text config (vLLM's qwen3_5.py: the same gated_delta_net_state_shape). Not run on real vLLM
    here: vLLM 0.32 imports torchvision for it, which the CPU environment lacks (the trial says so, exit 3)."""
    text = {**QWEN3_NEXT, "model_type": "qwen3_5_text", "full_attention_interval": None,
            "layer_types": ["linear_attention"] * 3 + ["full_attention"], "num_hidden_layers": 4}
    assert layer_windows({"model_type": "qwen3_5", "text_config": text}) == (State(),) * 3 + (None,)
    assert mamba_state(text) == mamba_state(QWEN3_NEXT)


NEMOTRON_NANO_PATTERN = "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-"
"""nvidia/NVIDIA-Nemotron-Nano-9B-v2's hybrid_override_pattern: 56 layers, 4 of attention (M mamba2, * attention,
- MLP)."""


def test_nemotron_h_keeps_state_and_attention_layers_only():
    """vLLM's nemotron_h.py: MLP and expert layers keep no cache; its mamba2 inner size is heads x head_dim
    and its SSM state float32 unless the config names another dtype."""
    config = {"model_type": "nemotron_h", "num_hidden_layers": len(NEMOTRON_NANO_PATTERN),
              "hybrid_override_pattern": NEMOTRON_NANO_PATTERN, "mamba_num_heads": 128, "mamba_head_dim": 80,
              "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4, "num_attention_heads": 40,
              "num_key_value_heads": 8, "head_dim": 128, "torch_dtype": "bfloat16"}
    spans = layer_windows(config)
    assert spans is not None and spans.count(None) == 4 and spans.count(State()) == NEMOTRON_NANO_PATTERN.count("M")
    assert mamba_state(config) == (3 * (128 * 80 + 2 * 8 * 128) * 2, 128 * 80 * 128)
    assert ssm_dtype_bytes(config) == 4 and ssm_dtype_bytes({**config, "mamba_ssm_cache_dtype": "bfloat16"}) == 2
    assert kv_bytes_per_token(config) is None and unmodelled_attention(config) is None
    transformers_5 = {**config, "hybrid_override_pattern": None,
                      "layers_block_type": ["mamba" if c == "M" else "attention" if c == "*" else "mlp"
                                            for c in NEMOTRON_NANO_PATTERN]}
    assert layer_windows(transformers_5) == spans


FALCON_H1_1_5B = {"model_type": "falcon_h1", "num_hidden_layers": 24, "hidden_size": 2048, "num_attention_heads": 8,
                  "num_key_value_heads": 2, "head_dim": 128, "mamba_n_heads": 48, "mamba_d_head": 64,
                  "mamba_d_ssm": 3072, "mamba_d_state": 256, "mamba_n_groups": 1, "mamba_d_conv": 4,
                  "mamba_expand": 2, "torch_dtype": "bfloat16"}
"""Falcon-H1-1.5B's shapes as transformers' model page lists them (v5.0.0rc1 docs, model_doc/falcon_h1.md:
depth 24, dim 2048, 8 attention heads, 2 KV, 48 mamba heads, head dims 128 / 64, d_state 256)."""


def test_falcon_h1_has_an_attention_and_a_state_layer_in_every_layer():
    """vLLM's falcon_h1.py runs attention and a mamba2 mixer side by side in each decoder layer (the mixer
    registered as layer num_hidden_layers + i): 24 attention and 24 state layers, one group of each; the
    mixer's inner size is mamba_d_ssm, else expand x hidden (issue 30)."""
    spans = layer_windows(FALCON_H1_1_5B)
    assert spans is not None and spans.count(None) == 24 and spans.count(State()) == 24
    assert kv_bytes_per_token(FALCON_H1_1_5B) is None and unmodelled_attention(FALCON_H1_1_5B) is None
    assert mamba_state(FALCON_H1_1_5B) == (3 * (3072 + 2 * 256) * 2, 48 * 64 * 256)
    without_d_ssm = {**FALCON_H1_1_5B, "mamba_d_ssm": None}
    assert mamba_state(without_d_ssm) == (3 * (2 * 2048 + 2 * 256) * 2, 48 * 64 * 256)
    assert mamba_state({**without_d_ssm, "mamba_expand": None}) is None
    layout = candidate_layouts(spans, (1,))[0]
    assert layout.layers_per_group == 24 and layout.windows == (None, State(1))
    # the tiny Falcon-H1 of the real tests: 48 blocks of four 32 KiB pages serve 5888, prefix caching off
    assert candidate_layouts((None,) * 4 + (State(),) * 4, (1,))[0].longest_held(48, 128, 4096) == 5888


GEMMA4_26B_A4B = {"model_type": "gemma4_text", "hidden_size": 2816, "num_hidden_layers": 30, "num_attention_heads": 16,
                  "num_key_value_heads": 8, "num_global_key_value_heads": 2, "head_dim": 256, "global_head_dim": 512,
                  "sliding_window": 1024, "attention_k_eq_v": True, "max_position_embeddings": 262144,
                  "layer_types": ["full_attention" if i % 6 == 5 else "sliding_attention" for i in range(30)],
                  "torch_dtype": "bfloat16"}
"""google/gemma-4-26B-A4B's attention numbers as a public repository's design notes quote them (GEMMA4_26B_CONFIG:
8 KV heads on sliding layers, 2 on global ones, K = V; full attention on layers 5, 11, 17, 23, 29)."""
GEMMA4_E2B = {"model_type": "gemma4_text", "hidden_size": 1536, "num_hidden_layers": 35, "num_attention_heads": 8,
              "num_key_value_heads": 1, "head_dim": 256, "global_head_dim": 512, "sliding_window": 512,
              "num_kv_shared_layers": 20, "attention_k_eq_v": False, "torch_dtype": "bfloat16",
              "layer_types": ["full_attention" if i % 5 == 4 else "sliding_attention" for i in range(35)]}
"""google/gemma-4-E2B's as public repositories quote them (a training guide: head_dim 256, global_head_dim 512,
full attention on layers 4, 9, ..., 34; a notebook's tests: 35 layers, 1 KV head, 20 KV-shared layers)."""


def test_gemma4_global_layers_have_pages_of_their_own():
    """Gemma 4's full-attention layers take global_head_dim (and, with attention_k_eq_v,
    num_global_key_value_heads): their page differs from the sliding layers', and vLLM raises the smaller
    pages' block until every page is equal (unify_kv_cache_spec_page_size). 26B-A4B: sliding 8 x 256, global
    2 x 512 (half the page: blocks of twice the tokens); groups of five layers, five sliding and one global.
    E2B: the last 20 layers reuse earlier layers' caches, so 15 keep one (12 sliding, 3 global, whose page is
    twice the sliding one). Before: every layer costed with head_dim, the first length off (2 launches)."""
    spans = layer_windows(GEMMA4_26B_A4B)
    assert spans is not None and spans.count(None) == 5 and unmodelled_attention(GEMMA4_26B_A4B) is None
    shapes = layer_page_shapes(GEMMA4_26B_A4B)
    assert shapes is not None and shapes[5] == (2, 2 * 512 * 2) and shapes[0] == (8, 2 * 256 * 2)
    layout = candidate_layouts(spans, (1,), [1 if span else 2 for span in spans])
    assert layout == (KvLayout((1024,) * 5 + (None,), 5, "hybrid", (1,) * 5 + (2,)),)
    assert layout[0].request_blocks(8192, 16, 2048) == 5 * (cdiv(1023 + 2048, 16) + 1) + cdiv(8192, 32)
    e2b = layer_windows(GEMMA4_E2B)
    assert e2b is not None and len(e2b) == 15 and [i for i, span in enumerate(e2b) if span is None] == [4, 9, 14]
    assert layer_page_shapes(GEMMA4_E2B) == tuple((1, 2 * (512 if span is None else 256) * 2) for span in e2b)
    assert kv_bytes_per_token({**GEMMA4_E2B, "layer_types": None, "model_type": "gemma3_text"}) == 15 * 1024
    # without attention_k_eq_v the global KV heads stay num_key_value_heads; no global_head_dim: 512
    assert layer_page_shapes({**GEMMA4_26B_A4B, "attention_k_eq_v": False})[5] == (8, 2 * 512 * 2)
    unnamed = {key: value for key, value in GEMMA4_26B_A4B.items() if key != "global_head_dim"}
    assert layer_page_shapes(unnamed)[5] == (2, 2 * 512 * 2)
    # transformers' own per_layer_config, and keys in it this tool does not read
    listed = {**GEMMA4_26B_A4B, "per_layer_config": {"5": {"head_dim": 128}}}
    assert layer_page_shapes(listed)[5] == (8, 2 * 128 * 2) and layer_page_shapes(listed)[11] == (8, 2 * 256 * 2)
    odd = {**GEMMA4_26B_A4B, "per_layer_config": {"5": {"sliding_window": 64}}}
    assert "per_layer_config" in str(unmodelled_attention(odd))


@pytest.mark.parametrize("blocks, in_flight, served", [(96, 4096, 3200), (96, 2048, 5120)])
def test_the_tiny_gemma4_pool_is_read_with_its_raised_sliding_blocks(blocks, in_flight, served):
    """The tiny Gemma 4 of the real tests (6 MiB: 96 blocks of 64 KiB; five sliding layers of 32-wide heads
    in 256-token blocks, one global of 64-wide in 128): 3200 offline, 5120 served, each checked outside the
    tool (L served, L + 1 refused; scripts/boundary.py, 2026-12-05); vLLM printed 3233 and 5173 tokens."""
    layout = candidate_layouts((512,) * 5 + (None,), (1,), (2,) * 5 + (1,))[0]
    assert layout.longest_held(blocks, 128, in_flight) == served
    printed = {3200: 3233, 5120: 5173}[served]
    assert tokens_line(blocks, layout.request_blocks(served, 128, in_flight), served) == printed
    assert layout.least_blocks(3000, 128, 4096) == 90  # 5760 KiB for 3000 tokens; 5696 KiB was refused


def test_gemma3n_per_layer_numbers_and_kv_shared_layers(tmp_path):
    """Gemma 3n (transformers 5.19's Gemma3nTextConfig defaults, gemma-3n-E4B's shape: 35 layers, full attention
    every fifth, the last 15 sharing earlier layers' caches, intermediate_size a list of one per layer):
    read, not refused (it was: "intermediate_size must be a whole number"); 20 layers keep a cache."""
    config = {"architectures": ["Gemma3nForCausalLM"], "model_type": "gemma3n_text", "num_hidden_layers": 35,
              "hidden_size": 2048, "intermediate_size": [16384] * 35, "num_attention_heads": 8,
              "num_key_value_heads": 2, "head_dim": 256, "sliding_window": 512, "num_kv_shared_layers": 15,
              "max_position_embeddings": 32768, "vocab_size": 262400, "torch_dtype": "bfloat16",
              "layer_types": ["full_attention" if i % 5 == 4 else "sliding_attention" for i in range(35)]}
    (tmp_path / "config.json").write_text(json.dumps(config))
    info = read_model_info(str(tmp_path))
    assert info.layer_windows is not None and len(info.layer_windows) == 20 and info.layer_windows.count(None) == 4
    assert info.layer_page_shapes is None and info.unmodelled_attention is None
    assert info.config_weights_bytes is not None
    (tmp_path / "config.json").write_text(json.dumps({**config, "num_kv_shared_layers": 35}))
    with pytest.raises(BadInput, match="num_kv_shared_layers must be a whole number below num_hidden_layers"):
        read_model_info(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({**config, "intermediate_size": ["8192"] * 35}))
    with pytest.raises(BadInput, match="intermediate_size must be a whole number"):
        read_model_info(str(tmp_path))


MELLUM2 = {"architectures": ["MellumForCausalLM"], "model_type": "mellum", "head_dim": 128, "hidden_size": 2304,
           "intermediate_size": 7168, "max_position_embeddings": 131072, "max_window_layers": 0,
           "moe_intermediate_size": 896, "num_attention_heads": 32, "num_experts": 64, "num_experts_per_tok": 8,
           "num_hidden_layers": 28, "num_key_value_heads": 4, "sliding_window": 1024, "vocab_size": 98304,
           "use_sliding_window": True, "dtype": "bfloat16"}
"""JetBrains Mellum 2's config.json as a public repository's tests quote it (MELLUM2_CONFIG, a Rust port's
mellum.rs; rope_parameters left out)."""


def test_a_zero_that_means_from_the_first_layer_is_not_refused(tmp_path):
    """max_window_layers 0 (Qwen2-style: the window from layer 0 on) was refused as "must be a whole number
    from 1" (exit 2 on a real model); a window or chunk of 0 means none."""
    (tmp_path / "config.json").write_text(json.dumps(MELLUM2))
    info = read_model_info(str(tmp_path))
    assert info.layer_windows == (1024,) * 28 and info.kv_bytes_per_token == 28 * 2 * 4 * 128 * 2
    (tmp_path / "config.json").write_text(json.dumps({**MELLUM2, "sliding_window": 0}))
    assert read_model_info(str(tmp_path)).sliding_window is None
    (tmp_path / "config.json").write_text(json.dumps({**MELLUM2, "max_window_layers": -1}))
    with pytest.raises(BadInput, match="max_window_layers must be a whole number from 0"):
        read_model_info(str(tmp_path))


def test_sliding_layers_with_heads_of_their_own_are_not_costed():
    """MiMo-V2-Flash gives its sliding layers other heads (swa_*) placed by hybrid_layer_pattern, and values
    narrower than keys: never costed from the one head shape (vLLM's own fit, then its proof)."""
    mimo = {"model_type": "mimo_v2_flash", "num_hidden_layers": 4, "num_attention_heads": 64,
            "num_key_value_heads": 4, "head_dim": 192, "v_head_dim": 128, "swa_num_key_value_heads": 8,
            "swa_head_dim": 192,
            "hybrid_layer_pattern": [0, 1, 1, 1], "sliding_window": 128, "torch_dtype": "bfloat16"}
    assert "swa_head_dim" in str(unmodelled_attention(mimo))
    plain = {key: value for key, value in mimo.items() if not key.startswith(("swa_", "hybrid_"))}
    assert "v_head_dim 128" in str(unmodelled_attention(plain))


def test_exaone4_letters_place_its_sliding_layers():
    """EXAONE 4's sliding_window_pattern "LLLG": three local layers, then a global one."""
    config = {"model_type": "exaone4", "num_hidden_layers": 8, "sliding_window": 4096,
              "sliding_window_pattern": "LLLG"}
    assert layer_windows(config) == (4096, 4096, 4096, None) * 2


JAMBA_1_5_MINI = {"architectures": ["JambaForCausalLM"], "model_type": "jamba", "attn_layer_offset": 4,
                  "attn_layer_period": 8, "expert_layer_offset": 1, "expert_layer_period": 2, "hidden_size": 4096,
                  "intermediate_size": 14336, "mamba_d_conv": 4, "mamba_d_state": 16, "mamba_dt_rank": 256,
                  "mamba_expand": 2, "max_position_embeddings": 262144, "num_attention_heads": 32,
                  "num_experts": 16, "num_hidden_layers": 32, "num_key_value_heads": 8}
"""ai21labs/AI21-Jamba-1.5-Mini's config.json (the keys read here), as a public repository's test helper quotes
it with its hub address (a model zoo's get_jamba builder, 2025); Jamba-v0.1's has the same shape."""


def test_jamba_keeps_a_mamba_state_in_seven_layers_of_eight():
    """vLLM's jamba.py reads transformers' layers_block_type: attention where index % attn_layer_period ==
    attn_layer_offset (8 and 4 by default), mamba (v1) elsewhere, whose state is (d_conv - 1) x inner in the
    model's dtype and inner x d_state, inner = expand x hidden (mamba1_state_shape). 4 attention layers, 28
    mamba: groups of four layers, seven state groups and one attention group. Before, Jamba was not costed
    (vLLM's auto-fit, then a launch above it)."""
    spans = layer_windows(JAMBA_1_5_MINI)
    assert spans is not None and [i for i, span in enumerate(spans) if span is None] == [4, 12, 20, 28]
    assert spans.count(State()) == 28 and unmodelled_attention(JAMBA_1_5_MINI) is None
    assert kv_bytes_per_token(JAMBA_1_5_MINI) is None
    assert mamba_state({**JAMBA_1_5_MINI, "torch_dtype": "bfloat16"}) == (3 * 8192 * 2, 8192 * 16)
    defaults = {key: value for key, value in JAMBA_1_5_MINI.items() if not key.startswith("attn_layer")}
    assert layer_windows(defaults) == spans
    layout = candidate_layouts(spans, (1,))[0]
    assert layout.layers_per_group == 4 and layout.windows == (State(1),) * 7 + (None,)
    assert mamba_state({**JAMBA_1_5_MINI, "mamba_d_state": None}) is None
    odd = {**JAMBA_1_5_MINI, "attn_layer_offset": -1}
    assert layer_windows(odd) is None and "placed in a way this tool does not read" in str(unmodelled_attention(odd))


LFM2_1_2B = {"architectures": ["Lfm2ForCausalLM"], "model_type": "lfm2", "num_hidden_layers": 16, "hidden_size": 2048,
             "num_attention_heads": 32, "num_key_value_heads": 8, "conv_L_cache": 3, "conv_dim": 2048,
             "block_dim": 2048, "full_attn_idxs": [2, 5, 8, 10, 12, 14], "max_position_embeddings": 128000,
             "torch_dtype": "bfloat16"}
"""LiquidAI/LFM2-1.2B's config.json (the keys read here), as quoted verbatim in public repositories' tests (a
Rust port's LFM2_HF_CONFIG_JSON, "read from the Hub"; an NPU port's HF_LFM2_1_2B, 2026): no layer_types,
the attention layers named by full_attn_idxs. LFM2.5 configs name `layer_types` ("conv", "full_attention")
with full_attn_idxs null."""


def test_lfm2_short_convolutions_are_state_layers():
    """vLLM's lfm2.py: a layer is attention where layer_types says "full_attention", else a short convolution
    whose state is (conv_L_cache - 1) x conv_dim in the model's dtype (short_conv_state_shape), no SSM state;
    without layer_types, transformers makes the layers of full_attn_idxs attention. LFM2-MoE's convolutions
    are hidden_size wide (lfm2_moe.py). Six attention layers and ten convolutions: groups of six layers,
    one attention group and two state groups (issue 30)."""
    spans = layer_windows(LFM2_1_2B)
    assert spans is not None and [i for i, span in enumerate(spans) if span is None] == [2, 5, 8, 10, 12, 14]
    assert spans.count(State()) == 10 and unmodelled_attention(LFM2_1_2B) is None
    assert mamba_state(LFM2_1_2B) == (2 * 2048 * 2, 0)
    named = {**LFM2_1_2B, "full_attn_idxs": None,
             "layer_types": ["full_attention" if i in (2, 5, 8, 10, 12, 14) else "conv" for i in range(16)]}
    assert layer_windows(named) == spans
    moe = {**named, "model_type": "lfm2_moe", "conv_dim": None, "hidden_size": 1024}
    assert mamba_state(moe) == (2 * 1024 * 2, 0) and layer_windows(moe) == spans
    layout = candidate_layouts(spans, (1,))[0]
    assert layout.layers_per_group == 6 and layout.windows == (State(1), State(1), None)
    # a layer type vLLM would read as a convolution but this tool does not know, or no conv_dim: not costed
    assert unmodelled_attention({**named, "layer_types": ["mystery"] * 16}) == "layer types mystery"
    assert layer_windows({**named, "layer_types": ["mystery"] * 16}) is None
    assert "whose sizes config.json does not give" in str(unmodelled_attention({**LFM2_1_2B, "conv_dim": None}))
    # a pure mamba model (attention-free): never costed as plain attention
    assert unmodelled_attention({"model_type": "mamba", "num_hidden_layers": 24, "hidden_size": 768,
                                 "state_size": 16, "conv_kernel": 4, "expand": 2}) is not None


def test_a_length_read_off_layouts_another_trial_contradicts_proves_nothing():
    """The wrong "complete" this guard stops (measured 2026-12-05, the tiny Gemma 4 with KV-shared layers,
    served, 6 MiB, before those layers were read): the tool costed all 8 layers; at 4351 one of the
    in-flight guesses reproduced vLLM's "6,010 tokens" by chance and read 10240 off the pool as exact; 10240
    served, and the search stopped there, though 11008 serves (checked outside the tool). The 10240 trial's
    own figures (10,627 tokens) match no foreseen layout: now such a trial voids the lengths read off the
    layouts at that memory, and the search goes on above them."""
    old = candidate_layouts((512, 512, 512, None) * 2, (1,))
    kv = float(KV_6MIB)

    def seen(length: int, tokens: int, concurrency: float) -> Observation:
        facts = CapacityFacts(kv_cache_tokens=tokens, concurrency_len=length, num_blocks=192, block_size=128,
                              max_concurrency=concurrency)
        hint = max_len_hint(Outcome.OK, facts, V032_CPU, 128, plain_attention=False, layouts=old)
        exact = hint_is_exact(Outcome.OK, facts, V032_CPU, False, old)
        return Observation(requested=length, length=length, outcome=Outcome.OK, hint=hint, memory=kv, blocks=192,
                           block_size=128, kv_bytes=kv, kv_fixed=True, fixed_pool_bound=hint if exact else None,
                           hint_from_layout=hint is not None,
                           layouts_unexplained=layouts_unexplained(facts, V032_CPU, 128, old))

    lucky, served = seen(4351, 6010, 1.38), seen(10240, 10627, 1.04)
    assert lucky.fixed_pool_bound == 10240 and not lucky.layouts_unexplained
    assert served.hint is None and served.layouts_unexplained
    assert not bracket([lucky]).allowed(10241)  # alone, the lucky reading would end the search
    assert bracket([lucky, served]).allowed(10241) and bracket([lucky, served]).proven_ok == 10240


V019_CPU = Regime.of("0.19.1", cpu=True)


def test_before_0_20_1_the_groups_token_figure_and_the_concurrency_pick_the_layout():
    """vLLM 0.19.1 (CPU, VLLM_CPU_KVCACHE_SPACE=1), a Gemma 3 of five sliding layers (window 512) and one
    full, 64 KV heads of 256: 128 blocks of 128, "GPU KV cache size: 2,688 tokens" (128 // 6 groups x 128)
    and "Maximum concurrency for 2,433 tokens per request: 1.02x" (measured 2026-12-05). The pool holds
    2560 (it served; 2561 was refused at the start). Before, nothing was read off the pool before 0.20.1 and
    the search walked up one success at a time (17 launches); a layout with another number of groups does
    not reproduce the token figure."""
    facts = CapacityFacts(kv_cache_tokens=2688, concurrency_len=2433, num_blocks=128, block_size=128,
                          max_concurrency=1.02, in_flight_tokens=4096)
    layouts = candidate_layouts((512,) * 5 + (None,))
    assert max_len_hint(Outcome.OK, facts, V019_CPU, 128, plain_attention=False, layouts=layouts) == 2560
    assert hint_is_exact(Outcome.OK, facts, V019_CPU, False, layouts)
    assert max_len_hint(Outcome.OK, dataclasses.replace(facts, kv_cache_tokens=128 // 2 * 128), V019_CPU, 128,
                        plain_attention=False, layouts=layouts) is None
    assert max_len_hint(Outcome.OK, facts, Regime.of("0.9.0", cpu=True), 128, plain_attention=False,
                        layouts=layouts) is None  # no hybrid KV cache figures to read before 0.9.1


def test_a_cpu_pool_from_the_environment_does_not_shrink_with_the_length():
    """Before 0.20 the CPU backend sizes the pool from VLLM_CPU_KVCACHE_SPACE at every length: the too-long
    start's pessimistic reading (2433, from the estimate 2560) beside the exact 2560 of a start is no
    shrinking pool, so no secant step to 2559 before 2560 (measured on 0.19.1: 4 launches, now 3)."""
    assert V019_CPU.kv_from_environment and not V028_CPU.kv_from_environment

    def trial(length: int, outcome: Outcome, hint: int, exact: bool, from_environment: bool) -> Observation:
        return TrialRecord(index=1, llm_kwargs={"max_model_len": length}, outcome=outcome, detail="", duration_s=9.0,
                           length=length, hint=hint, hint_exact=exact, facts=CapacityFacts(block_size=128),
                           evidence=(), kv_from_environment=from_environment).observation()

    space = LengthSpace(1, 32768, 1)
    history = [trial(32768, Outcome.KV_TOO_SMALL, 2433, False, True), trial(2433, Outcome.OK, 2560, True, True)]
    assert history[1].kv_fixed and history[1].fixed_pool_bound == 2560
    assert Predict(space).propose(history) == 2560
    assert secant_length(space, history) is None  # one pool at every length: no line
    profiled = [trial(32768, Outcome.KV_TOO_SMALL, 2433, False, False), trial(2433, Outcome.OK, 2560, True, False)]
    # a profiled pool may shrink: the line through both points, which drops half a token from 2433 to the held
    # pool's reach 2560 (its 128-token block rounding hides that): the reach (before stop 43: 2559, the line's)
    assert secant_length(space, profiled) == 2560


def test_a_scheduler_that_admits_whole_prompts_bounds_a_sliding_layouts_request():
    """vLLM 0.19.1 admits a request only where its whole prompt's blocks are free in every group, windows
    not yet freeing any (`can_fit_full_sequence`): the same Gemma 3, served (2048 batched tokens), 128
    blocks, "Maximum concurrency for 2,591 tokens per request: 1.02x". Its start check passes up to 2944,
    but a request of 2817 or 2696 tokens waits forever and 2689 serves (6 x cdiv(2688, 128) = 126 blocks
    beside the null block; measured 2026-12-06, 21 launches before). Without the gate (0.14, 0.28) the
    window-aware need decides: 2817, which 0.19.1 does not serve."""
    facts = CapacityFacts(kv_cache_tokens=2688, concurrency_len=2591, num_blocks=128, block_size=128,
                          max_concurrency=1.02)
    layouts = candidate_layouts((512,) * 5 + (None,))
    gated = Regime.of("0.19.1", cpu=True, whole_prompt_admission=True)
    assert max_len_hint(Outcome.OK, facts, gated, 128, plain_attention=False, layouts=layouts) == 2689
    assert hint_is_exact(Outcome.OK, facts, gated, False, layouts)
    assert max_len_hint(Outcome.OK, facts, V019_CPU, 128, plain_attention=False, layouts=layouts) == 2817
    gemma3 = hybrid_layout([512] * 5 + [None])
    assert gemma3.admission_blocks(2688, 128) == 126 and gemma3.admission_blocks(2689, 128) == 132
    assert hybrid_layout([State(2), None]).admission_blocks(300, 128) == 2 + 3


@pytest.mark.parametrize("source, gated", [
    ("    def can_fit_full_sequence(self, request):\n        pass\n", True),  # 0.19: no window cap
    ("    def can_fit_full_sequence(self, request):\n        apply_admission_cap=True\n", False),
    ("    def allocate_slots(self, request):\n        pass\n", False),  # 0.14: the first chunk only
])
def test_the_admission_rule_is_read_from_the_installed_vllm(source, gated, tmp_path, monkeypatch):
    """The trial interpreter's vLLM source says whether its scheduler admits whole prompts (read as text,
    vLLM is not imported)."""
    core = tmp_path / "vllm" / "v1" / "core"
    core.mkdir(parents=True)
    (tmp_path / "vllm" / "__init__.py").write_text('__version__ = "0.19.1"\n')
    (core / "kv_cache_manager.py").write_text("class KVCacheManager:\n" + source)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert inspect_interpreter(sys.executable).whole_prompt_admission is gated


def test_under_whole_prompt_admission_a_too_long_estimate_is_read_as_the_least_admitted_length():
    """The served Gemma 3 on 0.19.1: "the estimated maximum model length is 2944" at 32768 (2048 batched
    tokens). The start check would pass up to it, but a pool that just holds 2944 (128 blocks) admits no
    prompt longer than 2688 (6 x 21 blocks beside the null block), and were the six layers one sliding group,
    a pool of 21 blocks none longer than 2560. The first guess is the least, 2561, which serves and whose
    figures then name 2689; it was 2817, a request that waits forever (a whole trial timeout)."""
    facts = CapacityFacts(estimated_max_len=2944, max_num_batched_tokens=2048, block_size=128)
    layouts = candidate_layouts((512,) * 5 + (None,))
    gated = Regime.of("0.19.1", cpu=True, whole_prompt_admission=True)
    assert max_len_hint(Outcome.KV_TOO_SMALL, facts, V019_CPU, 128, plain_attention=False, layouts=layouts) == 2817
    assert max_len_hint(Outcome.KV_TOO_SMALL, facts, gated, 128, plain_attention=False, layouts=layouts) == 2561
    assert hybrid_layout([512] * 5 + [None]).admitted_within(2944, 128, 2048) == 2689


FALCON_7B = {"architectures": ["FalconForCausalLM"], "model_type": "falcon", "hidden_size": 4544,
             "num_attention_heads": 71, "num_hidden_layers": 32, "multi_query": True, "new_decoder_architecture": False,
             "parallel_attn": True, "alibi": False, "bias": False, "vocab_size": 65024, "torch_dtype": "bfloat16"}
FALCON_40B = {"architectures": ["FalconForCausalLM"], "model_type": "falcon", "hidden_size": 8192,
              "num_attention_heads": 128, "num_hidden_layers": 60, "num_kv_heads": 8, "new_decoder_architecture": True,
              "parallel_attn": True, "alibi": False, "bias": False, "vocab_size": 65024, "torch_dtype": "bfloat16"}
STARCODER = {"architectures": ["GPTBigCodeForCausalLM"], "model_type": "gpt_bigcode", "n_embd": 6144, "n_head": 48,
             "n_layer": 40, "n_positions": 8192, "multi_query": True, "vocab_size": 49152, "torch_dtype": "float32"}
GLM4_CHATGLM = {"architectures": ["ChatGLMModel"], "model_type": "chatglm", "num_layers": 40, "hidden_size": 4096,
                "num_attention_heads": 32, "kv_channels": 128, "multi_query_attention": True,
                "multi_query_group_num": 2, "seq_length": 131072, "padded_vocab_size": 151552,
                "torch_dtype": "bfloat16"}
MPT_7B = {"architectures": ["MPTForCausalLM"], "model_type": "mpt", "d_model": 4096, "n_heads": 32, "n_layers": 32,
          "max_seq_len": 2048, "attn_config": {"attn_type": "multihead_attention", "alibi": True}, "vocab_size": 50432}
DBRX = {"architectures": ["DbrxForCausalLM"], "model_type": "dbrx", "d_model": 6144, "n_heads": 48, "n_layers": 40,
        "max_seq_len": 32768, "attn_config": {"kv_n_heads": 8, "rope_theta": 500000}, "vocab_size": 100352,
        "torch_dtype": "bfloat16"}
"""The published configs' attention keys (tiiuae/falcon-7b, tiiuae/falcon-40b, bigcode/starcoder, THUDM/glm-4-9b-chat,
mosaicml/mpt-7b, databricks/dbrx-instruct), the rest left out."""


@pytest.mark.parametrize("config, per_token", [
    (FALCON_7B, 32 * 1 * 64 * 2 * 2),     # multi-query: one KV head, whatever num_kv_heads says
    ({**FALCON_7B, "num_kv_heads": 71}, 32 * 1 * 64 * 2 * 2),  # as transformers 5 saves it
    (FALCON_40B, 60 * 8 * 64 * 2 * 2),    # the new decoder architecture: num_kv_heads
    (STARCODER, 40 * 1 * 128 * 2 * 2),    # GPT-2's names (n_embd, n_head, n_layer); multi-query
    (GLM4_CHATGLM, 40 * 2 * 128 * 2 * 2),  # num_layers and multi_query_group_num
    (MPT_7B, 32 * 32 * 128 * 2 * 2),      # d_model, n_heads, n_layers; no kv_n_heads: one per head
    (DBRX, 40 * 8 * 128 * 2 * 2),         # attn_config.kv_n_heads
])
def test_kv_heads_are_counted_as_vllm_counts_them(config, per_token):
    """vLLM's get_total_num_kv_heads and transformers' attribute names: the tool counted every attention head
    of a multi-query Falcon (71x the KV a token takes) and could not read StarCoder's at all. (Every config's
    dtype is set to bfloat16 here: how vLLM serves a float32 checkpoint is another question.)"""
    from vllm_fit.prepare.attention import kv_bytes_per_token as per_token_of

    config = {**config, "torch_dtype": "bfloat16"}
    assert per_token_of(config) == per_token


def test_a_kv_head_count_out_of_range_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({**FALCON_40B, "num_kv_heads": 10 ** 12}))
    with pytest.raises(BadInput, match="num_kv_heads must be a whole number"):
        read_model_info(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({**STARCODER, "n_head": "48"}))  # an alias that is no count
    assert read_model_info(str(tmp_path)).kv_bytes_per_token is None  # left to vLLM's auto-fit, as before


def test_a_page_config_json_got_wrong_is_not_a_lower_bound_for_the_least_kv():
    """Where a start's pool holds four times the blocks config.json's page allows (a multi-query Falcon read as
    one KV head per attention head), the page is vLLM's own and the least KV size is proven by a failure below,
    not read off config.json (which claimed 4224 KiB the least for 4000 tokens, where 1056 KiB serves)."""
    regime = Regime.of("0.32.0")
    model = KvModel(bytes_per_token=1024, total_bytes=None, regime=regime, guess_block_size=128)
    fit = Observation(4000, 4000, Outcome.OK, memory=4325376.0, blocks=132, block_size=128, kv_bytes=4325376.0)
    assert not model.config_page_holds([fit]) and model.page_bytes([fit]) == 32768
    assert not model.need_exact(4000, [fit])
    right = KvModel(bytes_per_token=256, total_bytes=None, regime=regime, guess_block_size=128)
    assert right.config_page_holds([fit]) and right.need_exact(4000, [fit])


def test_a_float32_checkpoint_is_reckoned_in_16_bits():
    """vLLM's dtype=auto casts a float32 checkpoint to 16 bits (float16 before 0.10.1, bfloat16 since; the CPU
    too): its KV cache and weights take 2 bytes a value, not 4 (`--engine-arg dtype=float32` keeps 4)."""
    from vllm_fit.prepare.config_basics import model_dtype_bytes

    assert model_dtype_bytes({"torch_dtype": "float32"}) == 2 and model_dtype_bytes({"dtype": "float"}) == 2
    assert model_dtype_bytes({}) == 2 and model_dtype_bytes({"torch_dtype": "bfloat16"}) == 2
    llama = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
             "hidden_size": 128, "torch_dtype": "float32"}
    assert kv_bytes_per_token(llama) == 2 * 2 * 32 * 2 * 2


@pytest.mark.parametrize("cache_dtype, per_token", [
    ("auto", 131072), ("fp8", 65536), ("fp8_e5m2", 65536), ("FP8_E4M3", 65536), ("bfloat16", 131072),
    ("fp8_ds_mla", None), ("fp8_per_token_head", None), ("nvfp4", None), ("turboquant_k8v4", None)])
def test_only_one_byte_cache_dtypes_halve_a_bf16_page(cache_dtype, per_token):
    """kv_cache_dtype fp8 keeps an element in a byte; DeepSeek's fp8_ds_mla (656 bytes a token for a
    576-wide latent) and the per-token-head, nvfp4 and turboquant dtypes add scales: their pages are not
    costed from config.json (None: vLLM's own figures only), never read as one byte an element."""
    info = ModelInfo(None, 131072, 32, 131072, None, num_kv_heads=8, dtype_bytes=2)
    assert info.kv_bytes_per_rank(1, {"kv_cache_dtype": cache_dtype}) == per_token


def test_on_a_gpu_a_state_hybrids_fixed_kv_size_is_read_before_a_launch():
    """No group of Granite 4.0-H Tiny (36 mamba2, 4 attention layers) keeps a window, so its need does not
    depend on the tokens in flight, which a GPU's first launch has not reported: 147 MiB of KV in 400-token
    blocks of 4 layers x 2 KiB a token hold 7600 tokens with three state blocks a request (the simulated
    world state-001 of seed 2026: 7600 serves, 7601 does not), launched first. A window's need does depend on
    them: none read before a launch."""
    spans = (State(),) * 5 + ((None,) + (State(),) * 9) * 3 + (None,) + (State(),) * 4
    gpu = Regime.of("0.33.0", cpu=False)
    state = KvModel(None, None, gpu, guess_block_size=400, plain=False, layout=candidate_layouts(spans, (3, 1))[0],
                    layer_bytes_per_token=2048)
    assert state.length_for_bytes(154140672, 1, 131072, 1) == 7600
    assert state.length_for_bytes(154140672, 1, 131072, 256) == 7424
    window = KvModel(None, None, gpu, guess_block_size=16, plain=False,
                     layout=candidate_layouts((512,) * 5 + (None,))[0], layer_bytes_per_token=256)
    assert window.length_for_bytes(6 << 20, 1, 32768, 1) is None
