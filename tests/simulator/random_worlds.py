"""Seeded random worlds for the simulator: many versions, devices, models, memory figures and questions.

The named worlds of worlds.py stand for one regime or failure class each; these draw the same
ingredients at random, so that a search tuned to the named ones is checked on worlds nobody chose.
A world is kept only where the fakegpu's truth does not depend on how the verification request
splits prompt and output (its README's advice), and where the question is one vllm-fit accepts.
"""

from __future__ import annotations

import random
from typing import Any, Dict, List, Optional

from .worlds import GIB, GPUS, MIB, Case, question, world

VERSIONS = ["0.5.5", "0.6.3", "0.6.4.post1", "0.7.3", "0.8.5", "0.9.0.1", "0.9.2", "0.10.1.1", "0.10.2",
            "0.11.0", "0.13.0", "0.14.0", "0.17.1", "0.20.0", "0.24.0", "0.28.0", "0.29.0", "0.31.0", "0.32.0",
            "0.33.0", "0.34.0"]
OLDEST_VERSIONS = ["0.4.0", "0.4.0.post1", "0.4.1", "0.4.2", "0.4.3", "0.5.0", "0.5.1", "0.5.3.post1"]
"""The releases before VERSIONS' first (the fakegpu covers 0.4.0 on): drawn on their own (`versions=`)."""
SMALL_MODELS = ["llama-8b", "qwen-7b", "qwen-7b-yarn", "phi3-mini-128k"]
GRANULARITIES = [1, 16, 64, 128, 256, 1024]


def _v(version: str) -> tuple:
    return tuple(int(p) for p in version.split(".post")[0].split(".")[:3])


HYBRID_VERSIONS = ["0.10.2", "0.14.0", "0.20.0", "0.24.0", "0.28.0", "0.29.0", "0.31.0", "0.32.0", "0.33.0",
                   "0.34.0"]
WINDOW_MODELS = ["gemma-2-9b", "gemma-3-12b", "gpt-oss-20b", "mistral-7b", "phi3-mini-128k"]
"""Sliding-window and hybrid families (the fakegpu groups `layer_types` models from 0.29)."""


LATENT_VERSIONS = ["0.8.5", "0.9.2", "0.10.1.1", "0.10.2", "0.14.0", "0.20.0", "0.28.0", "0.29.0", "0.32.0",
                   "0.33.0", "0.34.0"]
LATENT_MODELS = ["deepseek-v2-lite", "moonlight-16b"]
"""MLA families (one latent a token and layer, from vLLM 0.7.1): 32 GB of weights, so an H100, or two A100-40s."""


STATE_VERSIONS = ["0.29.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0"]
STATE_MODELS = ["granite-4.0-h-tiny", "nemotron-nano-9b", "qwen3-next-80b"]
"""Mamba2 and gated DeltaNet hybrids (the fakegpu groups their layers from 0.29 and raises the attention block
to hold a state)."""


def _draw(rng: random.Random, index: int, hybrid: bool = False, versions: Optional[List[str]] = None,
          latent: bool = False, state: bool = False) -> Case:
    """One candidate world and question (not yet checked against the truth)."""
    if latent:
        return _draw_latent(rng, index)
    if state:
        return _draw_state(rng, index)
    version = rng.choice(versions or (HYBRID_VERSIONS if hybrid else VERSIONS))
    v = _v(version)
    gpu = rng.choice(list(GPUS))
    tp, count, model = 1, 1, rng.choice(WINDOW_MODELS if hybrid else SMALL_MODELS)
    if v < (0, 8) and rng.random() < 0.3:
        model = "mistral-7b"  # V0 caps a prompt's blocks at the window
    if hybrid:  # no 70B model: the families are the point; Gemma 3 12B needs more than 24 GB
        if model == "gemma-3-12b" and gpu not in ("H100", "A100-40"):
            gpu = rng.choice(["H100", "A100-40"])
    elif rng.random() < 0.15 and gpu in ("H100", "A100-40"):
        model, tp = "llama-70b", 4 if gpu == "A100-40" else 2
        count = tp
    elif rng.random() < 0.1:
        tp = count = 2
    extra: Dict[str, Any] = {}
    if (0, 8) <= v < (0, 11) and rng.random() < 0.2:
        extra = {"engine": "v0", "v0_fallback_reason": "--kv-cache-dtype is not supported by the V1 Engine"}
    memory = {"cuda_context_bytes": rng.randint(300, 650) * MIB, "non_torch_bytes": rng.randint(100, 900) * MIB,
              "activation_peak_bytes": rng.randint(512, 4096) * MIB, "cudagraph_bytes": rng.randint(0, 1500) * MIB,
              "runtime_headroom_bytes": rng.choice([0, 0, 0, rng.randint(100, 1600) * MIB])}
    foreign = rng.choice([0.0, 0.0, 0.0, round(rng.uniform(0.3, 5.0), 2)])
    adversarial: Dict[str, Any] = {}
    roll = rng.random()
    if roll < 0.08:
        adversarial["capacity_depends_on_len"] = rng.choice([4096, 16384, 65536])
    elif roll < 0.12:
        adversarial["flaky_crash_once"] = True
    spec = world(version, gpu, model, count=count, tp=tp, foreign_gib=foreign, memory=memory,
                 adversarial=adversarial, **extra)
    q = question(rng.choice([131072, 131072, 65536, 32768]), rng.choice(GRANULARITIES),
                 rng.choice([1, 1, 1, 1024, 4096]))
    if tp > 1:
        q["tensor_parallel_size"] = tp
    roll = rng.random()
    if roll < 0.1:
        q["gpu_memory_utilization"] = round(rng.uniform(0.6, 0.95), 2)
    elif roll < 0.17 and v >= (0, 10, 2):
        q["kv_cache_memory"] = rng.randint(256, 12 * 1024) * MIB
    elif roll < 0.25:
        q["target_len"] = rng.choice([2048, 8192, 16384, 32768])
    elif roll < 0.3:
        q["max_utilization"] = round(rng.uniform(0.8, 0.94), 2)
    tags = ["random"] + sorted(adversarial) + (["foreign"] if foreign else [])
    prefix = "hybrid" if hybrid else "random"
    return Case("%s-%03d-%s-%s" % (prefix, index, version, gpu), dict(spec, name="%s-%03d" % (prefix, index)), q,
                "%s world %d (%s)" % (prefix, index, model), tags + (["hybrid"] if hybrid else []))


def _draw_latent(rng: random.Random, index: int) -> Case:
    """An MLA world: H100 (FlashMLA's 64-token blocks) or two A100-40s at tensor parallel 2 (16-token blocks),
    the memory figures and questions drawn as for the other random worlds."""
    version, model = rng.choice(LATENT_VERSIONS), rng.choice(LATENT_MODELS)
    gpu = rng.choice(["H100", "H100", "A100-40"])
    tp = 2 if gpu == "A100-40" or rng.random() < 0.2 else 1
    memory = {"cuda_context_bytes": rng.randint(300, 650) * MIB, "non_torch_bytes": rng.randint(100, 900) * MIB,
              "activation_peak_bytes": rng.randint(512, 4096) * MIB, "cudagraph_bytes": rng.randint(0, 1500) * MIB,
              "runtime_headroom_bytes": rng.choice([0, 0, 0, rng.randint(100, 1600) * MIB])}
    foreign = rng.choice([0.0, 0.0, 0.0, round(rng.uniform(0.3, 5.0), 2)])
    extra: Dict[str, Any] = {"block_size": 64 if gpu == "H100" else 16}
    if (0, 8) <= _v(version) < (0, 11) and rng.random() < 0.2:
        extra.update(engine="v0", v0_fallback_reason="--kv-cache-dtype is not supported by the V1 Engine")
    spec = world(version, gpu, model, count=tp, tp=tp, foreign_gib=foreign, memory=memory, **extra)
    longest = spec["model"]["max_position_embeddings"]
    q = question(longest, rng.choice(GRANULARITIES), rng.choice([1, 1, 1024]))
    if tp > 1:
        q["tensor_parallel_size"] = tp
    roll = rng.random()  # the questions the latent's page decides: 32 GB of weights leave an 80 GB card room
    if roll < 0.35 and _v(version) >= (0, 10, 2):
        q["kv_cache_memory"] = rng.randint(64, 6 * 1024) * MIB
    elif roll < 0.65:
        q["target_len"] = min(longest, rng.choice([4096, 16384, 65536, 131072]))
    elif roll < 0.85:
        q["gpu_memory_utilization"] = round(rng.uniform(0.42, 0.6), 2)
    tags = ["latent"] + (["foreign"] if foreign else [])
    return Case("latent-%03d-%s-%s-tp%d" % (index, version, gpu, tp), dict(spec, name="latent-%03d" % index), q,
                "MLA world %d (%s)" % (index, model), tags)


def _draw_state(rng: random.Random, index: int) -> Case:
    """A state-hybrid world: Granite 4.0-H Tiny and Nemotron Nano 9B on one card or at tensor parallel 2 (one
    mamba group split across two ranks raises the groups), Qwen3-Next at tensor parallel 4 on H100s; prefix
    caching on or off; one world in five keeps a count of state blocks per request that no version's rules
    give vllm-fit first (2 for mamba2, 3 for gated DeltaNet)."""
    version, model = rng.choice(STATE_VERSIONS), rng.choice(STATE_MODELS)
    if model == "qwen3-next-80b":
        gpu, tp = "H100", 4
    else:
        gpu = rng.choice(["H100", "A100-40", "L4", "A10G"] if model == "granite-4.0-h-tiny" else ["H100", "A100-40"])
        tp = 2 if rng.random() < 0.3 else 1
    memory = {"cuda_context_bytes": rng.randint(300, 650) * MIB, "non_torch_bytes": rng.randint(100, 900) * MIB,
              "activation_peak_bytes": rng.randint(512, 4096) * MIB, "cudagraph_bytes": rng.randint(0, 1500) * MIB,
              "runtime_headroom_bytes": rng.choice([0, 0, 0, rng.randint(100, 1600) * MIB])}
    foreign = rng.choice([0.0, 0.0, 0.0, round(rng.uniform(0.3, 5.0), 2)])
    spec = world(version, gpu, model, count=tp, tp=tp, foreign_gib=foreign, memory=memory)
    if rng.random() < 0.2:
        spec["model"]["state"]["state_blocks"] = 2 if spec["model"]["state"]["kind"] == "mamba2" else 3
    longest = spec["model"]["max_position_embeddings"]
    q = question(min(longest, rng.choice([131072, 131072, 65536, 262144])), rng.choice(GRANULARITIES),
                 rng.choice([1, 1, 1024]))
    if tp > 1:
        q["tensor_parallel_size"] = tp
    roll = rng.random()  # few attention layers: a whole context fits in a GiB or two, so the KV is kept tight
    if roll < 0.3:
        q["kv_cache_memory"] = int(2 ** rng.uniform(4, 11)) * MIB
    elif roll < 0.55:
        q["target_len"] = min(longest, rng.choice([4096, 16384, 65536, 131072]))
    elif roll < 0.8:  # just above what the weights and the profile take
        taken = spec["model"]["weights_bytes"] / tp + sum(memory.values()) + foreign * GIB
        floor = taken / spec["gpu"]["total_bytes"]
        q["gpu_memory_utilization"] = round(min(0.95, floor + rng.uniform(0.0, 0.04)), 2)
    tags = ["state"] + (["foreign"] if foreign else []) + (
        ["odd-state-blocks"] if spec["model"]["state"].get("state_blocks") else [])
    return Case("state-%03d-%s-%s-tp%d" % (index, version, gpu, tp), dict(spec, name="state-%03d" % index), q,
                "state-hybrid world %d (%s)" % (index, model), tags)


def _acceptable(case: Case, truth_of) -> Optional[Dict[str, Any]]:
    """The truth, where it does not depend on the prompt/output split (None: draw again)."""
    from .harness import _fakeworld, _world

    spec = _world(case)
    one = truth_of(case)
    if "target_len" in case.question:
        return one
    other = _fakeworld.truth(spec, dict(case.question), k=64)
    return one if one.get("fit") == other.get("fit") else None


def random_cases(seed: int, count: int, hybrid: bool = False, versions: Optional[List[str]] = None,
                 latent: bool = False, state: bool = False) -> List[Case]:
    """`count` worlds drawn with `seed` (the same seed, the same worlds); `hybrid`: sliding-window and
    hybrid-attention families on V1; `versions`: the vLLM versions drawn from (OLDEST_VERSIONS); `latent`:
    MLA families (DeepSeek V2 and V3 layouts); `state`: mamba2 and gated DeltaNet hybrids."""
    from .harness import truth

    rng = random.Random(seed)
    found: List[Case] = []
    index = 0
    while len(found) < count:
        case = _draw(rng, index, hybrid, versions, latent, state)
        index += 1
        if case.question.get("kv_cache_memory") and case.question["kv_cache_memory"] > 0.9 * case.world["gpu"][
                "total_bytes"]:
            continue
        if case.question.get("target_len", 0) > case.world["model"]["max_position_embeddings"]:
            continue  # refused before a launch (exit 2): not a question vllm-fit accepts
        if _acceptable(case, truth) is not None:
            found.append(case)
    return found



INDIRECT_KINDS = ("shrinking-pool", "request-far", "foreign-request-oom", "hang-boundary")
"""Worlds where vLLM's numbers point at the answer only indirectly (issue 31): pools that shrink with the
length (V0 without chunked prefill profiles max_model_len tokens), requests that fail far below the pool,
out-of-memory on the request beside another process, starts that hang above some length."""


def _draw_indirect(rng: random.Random, index: int, kind: str) -> Case:
    """One candidate world of `kind` and a question (not yet checked against the truth)."""
    gpu = rng.choice(list(GPUS))
    model = rng.choice(["llama-8b", "qwen-7b", "phi3-mini-128k"] if gpu not in ("L4", "A10G", "4090")
                       else ["llama-8b", "qwen-7b", "phi3-mini-128k", "qwen-7b"])
    memory = {"cuda_context_bytes": rng.randint(300, 650) * MIB, "non_torch_bytes": rng.randint(100, 900) * MIB,
              "activation_peak_bytes": rng.randint(512, 3072) * MIB, "cudagraph_bytes": rng.randint(0, 1200) * MIB,
              "runtime_headroom_bytes": 0}
    adversarial: Dict[str, Any] = {}
    foreign, extra = 0.0, {}
    if kind == "shrinking-pool":
        version = rng.choice(["0.5.5", "0.6.3", "0.7.3", "0.9.2", "0.10.1.1", "0.13.0", "0.20.0", "0.28.0", "0.32.0"])
        if _v(version) < (0, 8) or rng.random() < 0.3:
            extra = {"engine": "v0", "v0_fallback_reason": "--kv-cache-dtype is not supported by the V1 Engine"} \
                if _v(version) >= (0, 8) and _v(version) < (0, 11) else {}
        adversarial["capacity_depends_on_len"] = rng.choice([16384, 32768, 65536, 131072, 196608])
    elif kind == "request-far":
        version = rng.choice(["0.9.2", "0.10.1.1", "0.11.0", "0.14.0", "0.20.0", "0.28.0", "0.29.0", "0.32.0",
                              "0.33.0"])
        adversarial["hang_when"] = {"max_model_len_gt": rng.choice([2048, 3000, 4096, 6000, 8192, 12000, 16384]),
                                    "at": "request"}
    elif kind == "foreign-request-oom":
        version = rng.choice(["0.5.5", "0.6.3", "0.7.3", "0.6.3", "0.7.3"])
        foreign = round(rng.uniform(1.0, 6.0), 2)
        memory["runtime_headroom_bytes"] = rng.randint(100, 1600) * MIB
    else:  # hang-boundary
        version = rng.choice(["0.7.3", "0.9.2", "0.11.0", "0.14.0", "0.20.0", "0.28.0", "0.32.0", "0.34.0"])
        adversarial["hang_when"] = {"max_model_len_gt": rng.choice([6000, 8192, 12288, 20480, 24000, 40000]),
                                    "at": "start"}
    spec = world(version, gpu, model, foreign_gib=foreign, memory=memory, adversarial=adversarial, **extra)
    q = question(rng.choice([131072, 65536, 32768]), rng.choice([1, 16, 128, 256, 1024]),
                 rng.choice([1, 1, 1, 1024]))
    roll = rng.random()
    if roll < 0.2:
        q["gpu_memory_utilization"] = round(rng.uniform(0.75, 0.95), 2)
    elif roll < 0.3 and kind == "foreign-request-oom":
        q["max_utilization"] = round(rng.uniform(0.85, 0.94), 2)
    tags = ["indirect", kind] + (["foreign"] if foreign else [])
    return Case("indirect-%03d-%s-%s-%s" % (index, kind, version, gpu), dict(spec, name="indirect-%03d" % index), q,
                "indirect world %d (%s, %s)" % (index, kind, model), tags)


def indirect_cases(seed: int, count: int) -> List[Case]:
    """`count` worlds of the four indirect kinds in turn, drawn with `seed` (the same seed, the same worlds)."""
    from .harness import truth

    rng = random.Random(seed)
    found: List[Case] = []
    index = 0
    while len(found) < count:
        case = _draw_indirect(rng, index, INDIRECT_KINDS[len(found) % len(INDIRECT_KINDS)])
        index += 1
        expected = _acceptable(case, truth)
        if expected is not None and _adversity_matters(case, expected):
            found.append(case)
    return found


def _adversity_matters(case: Case, expected: Dict[str, Any]) -> bool:
    """The world's difficulty decides its answer (without it, the answer would differ)."""
    from .harness import _fakeworld, _world

    calm = _world(case)
    calm["adversarial"], calm["foreign_bytes"] = {}, 0
    calm["memory"] = dict(calm["memory"], runtime_headroom_bytes=0)
    return _fakeworld.truth(calm, dict(case.question)).get("fit") != expected.get("fit")


__all__ = ["GIB", "OLDEST_VERSIONS", "indirect_cases", "random_cases"]
