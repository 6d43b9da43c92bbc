"""Layers that are not plain attention, as vLLM 0.32 lays them out: Llama 4's chunked local layers, and
the state layers of mamba (Jamba), mamba2 (Granite 4.0-H, Nemotron-H, Falcon-H1, Zamba2), gated DeltaNet
(Qwen3-Next, Qwen3.5) and short-convolution (LFM2) hybrids:
which layers they are, and how large one layer's state is (read from config.json without importing
transformers or vLLM; kv_groups.py says how vLLM groups and counts them)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..logs.kv_groups import Chunk, Span, State
from .config_basics import DTYPE_BYTES, model_dtype_bytes, positive_int, text_config

DELTANET_MODEL_TYPES = frozenset({"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"})
"""Gated DeltaNet hybrids (vLLM's qwen3_next.py and qwen3_5.py: gated_delta_net_state_shape)."""
SHORT_CONV_MODEL_TYPES = frozenset({"lfm2", "lfm2_moe"})
"""Short-convolution hybrids (vLLM's lfm2.py and lfm2_moe.py: short_conv_state_shape)."""
DELTANET = "deltanet"
"""The state family of every gated DeltaNet hybrid, by model type or by its keys (`state_family`)."""
ALIGNED_STATE_BLOCKS = {"granitemoehybrid": 3, "nemotron_h": 3, "falcon_h1": 3, "zamba2": 3, "jamba": 2,
                        DELTANET: 2, **{kind: 2 for kind in SHORT_CONV_MODEL_TYPES}}
"""Pool blocks one request's state takes in a state layer with prefix caching on (vLLM 0.32's "align"
mode), per state family: two states, and for mamba2 a prefill checkpoint (mamba_mixer2.py); measured on vLLM
0.32 (CPU), Jamba's at the start only (its mamba v1 layers take no checkpoint; the CPU kernel crashes on
its requests)."""
STATE_MODEL_TYPES = frozenset(ALIGNED_STATE_BLOCKS) - {DELTANET} | DELTANET_MODEL_TYPES
"""Hybrids whose state layers this tool costs by model type: Jamba's mamba layers (vLLM's jamba.py), Granite
4.0-H's mamba2 layers (vLLM's granitemoehybrid.py), Nemotron-H's (nemotron_h.py), Falcon-H1's (falcon_h1.py),
Zamba2's (zamba2.py), the gated DeltaNet layers of Qwen3-Next and Qwen3.5 (qwen3_next.py, qwen3_5.py) and
LFM2's short convolutions (lfm2.py); other gated DeltaNet hybrids by their keys (`state_family`)."""
_LINEAR_TYPES = frozenset({"linear_attention", "full_attention"})


def state_family(config: Dict[str, Any]) -> Optional[str]:
    """The family of the state layers this tool costs (a key of ALIGNED_STATE_BLOCKS), None for a model
    without them. Gated DeltaNet also by its keys: a config with the five numbers vLLM's
    gated_delta_net_state_shape reads and `layer_types` of linear and full attention (OLMo hybrid,
    MiniCPM-V 4.6's language model) is laid out as Qwen3-Next is, whatever its model type."""
    config = text_config(config)
    kind = str(config.get("model_type", ""))
    if kind in DELTANET_MODEL_TYPES:
        return DELTANET
    if kind in ALIGNED_STATE_BLOCKS:
        return kind
    types = config.get("layer_types")
    if isinstance(types, list) and "linear_attention" in types and set(map(str, types)) <= _LINEAR_TYPES \
            and all(positive_int(config.get(key)) for key in MAMBA_KEYS[DELTANET]):
        return DELTANET
    return None


def mamba_state(config: Dict[str, Any]) -> Optional[Tuple[int, int]]:
    """One state layer's state on one device: the conv state's bytes in the model's dtype and the
    recurrent (SSM) state's elements, whose dtype the engine chooses. Mamba2 (mamba2_state_shape):
    (d_conv - 1) x (inner + 2 x groups x d_state) and heads x head_dim x d_state, inner being expand x
    hidden (Granite), Falcon-H1's mamba_d_ssm, or heads x head_dim (Nemotron-H); gated DeltaNet
    (gated_delta_net_state_shape): (kernel - 1) x (2 x k_heads x k_dim + v_heads x v_dim) and v_heads x
    v_dim x k_dim; a short convolution (short_conv_state_shape): (L_cache - 1) x conv_dim, no SSM state;
    mamba (mamba1_state_shape): (d_conv - 1) x inner and inner x d_state, inner being expand x hidden.
    None where config.json lacks a number or the model is not one this tool costs."""
    config = zamba2_config(text_config(config))
    kind = state_family(config) or ""
    if kind in SHORT_CONV_MODEL_TYPES:
        return _short_conv_state(config)
    if kind == "jamba":
        return _mamba1_state(config)
    keys = MAMBA_KEYS.get(kind, ())
    values: List[int] = [int(config[key]) for key in keys if positive_int(config.get(key))]
    dtype = model_dtype_bytes(config)
    if not keys or dtype is None or len(values) != len(keys):
        return None
    if kind == DELTANET:
        k_heads, v_heads, k_dim, v_dim, kernel = values
        return (kernel - 1) * (2 * k_heads * k_dim + v_heads * v_dim) * dtype, v_heads * v_dim * k_dim
    heads, head_dim, d_state, groups, d_conv, *inner_factors = values
    inner: Optional[int] = inner_factors[0] * inner_factors[1] if inner_factors else heads * head_dim
    if kind == "falcon_h1":
        inner = _falcon_h1_inner(config)
    if inner is None:
        return None
    return (d_conv - 1) * (inner + 2 * groups * d_state) * dtype, heads * head_dim * d_state


def mamba2_groups(config: Dict[str, Any]) -> Tuple[int, int]:
    """A mamba2 layer's B/C groups and the conv-state bytes one group adds ((d_conv - 1) x 2 x d_state in the
    model's dtype): vLLM's mamba2_state_shape raises the groups to the tensor-parallel size where it does not
    divide them (extra_groups_for_head_shards), so each rank's conv state holds more than a share. (0, 0) for
    other state layers."""
    config = zamba2_config(text_config(config))
    kind = state_family(config) or ""
    if kind not in MAMBA_KEYS or kind == DELTANET:  # the mamba2 families
        return 0, 0
    numbers = [config[key] for key in MAMBA_KEYS[kind][2:5] if positive_int(config.get(key))]
    dtype = model_dtype_bytes(config)
    if len(numbers) != 3 or not dtype:
        return 0, 0
    d_state, groups, d_conv = (int(value) for value in numbers)
    return groups, (d_conv - 1) * 2 * d_state * dtype


def _short_conv_state(config: Dict[str, Any]) -> Optional[Tuple[int, int]]:
    """LFM2's conv state: (conv_L_cache - 1) x conv_dim in the model's dtype (LFM2-MoE: hidden_size wide);
    conv_L_cache is 3 where config.json names none (transformers' default)."""
    width = config.get("hidden_size" if config.get("model_type") == "lfm2_moe" else "conv_dim")
    kernel = config.get("conv_L_cache")
    kernel, dtype = 3 if kernel is None else kernel, model_dtype_bytes(config)
    if not isinstance(width, int) or not isinstance(kernel, int) or not positive_int(width) or kernel < 2 \
            or dtype is None:
        return None
    return (kernel - 1) * width * dtype, 0


def _mamba1_state(config: Dict[str, Any]) -> Optional[Tuple[int, int]]:
    """Jamba's mamba state (jamba.py, mamba1_state_shape): a conv state of (mamba_d_conv - 1) x inner in the
    model's dtype and an SSM state of inner x mamba_d_state, inner being mamba_expand x hidden_size."""
    keys = ("mamba_expand", "hidden_size", "mamba_d_state", "mamba_d_conv")
    values = [int(config[key]) for key in keys if positive_int(config.get(key))]
    dtype = model_dtype_bytes(config)
    if len(values) != len(keys) or dtype is None:
        return None
    expand, hidden, d_state, d_conv = values
    inner = expand * hidden
    return (d_conv - 1) * inner * dtype, inner * d_state


def jamba_layers(config: Dict[str, Any], layers: int) -> Optional[Tuple[Span, ...]]:
    """Jamba (transformers' JambaConfig.layers_block_type, which vLLM's jamba.py reads): attention on the
    layers where index % attn_layer_period == attn_layer_offset (8 and 4 where config.json names none),
    mamba on the others."""
    period, offset = config.get("attn_layer_period", 8), config.get("attn_layer_offset", 4)
    if not isinstance(period, int) or not positive_int(period) or not isinstance(offset, int) \
            or isinstance(offset, bool) or offset < 0:
        return None
    return tuple(None if i % period == offset else State() for i in range(layers))


def short_conv_layers(config: Dict[str, Any], layers: int) -> Optional[Tuple[Span, ...]]:
    """LFM2 (vLLM's lfm2.py): `layer_types` names each layer "full_attention" or "conv"; without it
    transformers makes the layers in `full_attn_idxs` attention (every layer where it is absent too)."""
    if str(config.get("model_type", "")) not in SHORT_CONV_MODEL_TYPES:
        return None
    types, indexes = config.get("layer_types"), config.get("full_attn_idxs")
    if isinstance(types, list):
        if len(types) != layers or any(kind not in ("full_attention", "conv") for kind in types):
            return None
        return tuple(None if kind == "full_attention" else State() for kind in types)
    if indexes is None:
        return (None,) * layers
    if not isinstance(indexes, list) or any(not isinstance(i, int) or isinstance(i, bool) for i in indexes):
        return None
    return tuple(None if i in indexes else State() for i in range(layers))


def _falcon_h1_inner(config: Dict[str, Any]) -> Optional[int]:
    """Falcon-H1's mamba inner size (falcon_h1.py): mamba_d_ssm, else mamba_expand x hidden_size."""
    d_ssm, expand, hidden = config.get("mamba_d_ssm"), config.get("mamba_expand"), config.get("hidden_size")
    if d_ssm is not None:
        return d_ssm if isinstance(d_ssm, int) and positive_int(d_ssm) else None
    if isinstance(expand, int) and isinstance(hidden, int) and positive_int(expand) and positive_int(hidden):
        return expand * hidden
    return None


MAMBA_KEYS = {
    "granitemoehybrid": ("mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_d_conv",
                         "mamba_expand", "hidden_size"),
    "nemotron_h": ("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel"),
    "falcon_h1": ("mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_d_conv"),
    "zamba2": ("n_mamba_heads", "mamba_headdim", "mamba_d_state", "mamba_ngroups", "mamba_d_conv", "mamba_expand",
               "hidden_size"),
    DELTANET: ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                 "linear_conv_kernel_dim"),
}
"""The config.json keys of a state layer's shape, per model type (vLLM's get_mamba_state_shape_from_config)."""


def ssm_dtype_bytes(config: Dict[str, Any]) -> Optional[int]:
    """The SSM state's element size where the model decides it: Nemotron-H's `mamba_ssm_cache_dtype`,
    float32 when it names none (vLLM's NemotronHForCausalLMConfig); None: the engine's choice."""
    config = text_config(config)
    if str(config.get("model_type", "")) != "nemotron_h":
        return None
    return DTYPE_BYTES.get(str(config.get("mamba_ssm_cache_dtype") or "float32"))


_NEMOTRON_PATTERN = {"M": State(), "*": None, "-": "none", "E": "none"}
_NEMOTRON_TYPES = {"mamba": State(), "linear_attention": State(), "attention": None, "full_attention": None,
                   "mlp": "none", "moe": "none"}


def nemotron_layers(config: Dict[str, Any], layers: int) -> Optional[Tuple[Span, ...]]:
    """Nemotron-H (vLLM's nemotron_h.py): the hub's `hybrid_override_pattern` (M mamba2, * attention, - MLP,
    E experts) or transformers 5's `layers_block_type`; MLP and expert layers keep no cache, so only the
    mamba and attention layers are returned."""
    pattern, types = config.get("hybrid_override_pattern"), config.get("layers_block_type")
    if isinstance(pattern, str) and len(pattern) == layers and set(pattern) <= set(_NEMOTRON_PATTERN):
        kinds: list = [_NEMOTRON_PATTERN[char] for char in pattern]
    elif isinstance(types, list) and len(types) == layers and all(kind in _NEMOTRON_TYPES for kind in types):
        kinds = [_NEMOTRON_TYPES[kind] for kind in types]
    else:
        return None
    return tuple(kind for kind in kinds if kind != "none")


def falcon_h1_layers(config: Dict[str, Any], layers: int) -> Optional[Tuple[Span, ...]]:
    """Falcon-H1 (vLLM's falcon_h1.py): every decoder layer runs attention and a mamba2 mixer side by side,
    so the cache has one attention layer and one state layer per decoder layer."""
    if str(config.get("model_type", "")) != "falcon_h1":
        return None
    return (None,) * layers + (State(),) * layers


def zamba2_config(config: Dict[str, Any]) -> Dict[str, Any]:
    """Zamba2's config.json with the sizes transformers derives where the file names none (Zamba2Config:
    attention_head_dim = 2 x hidden / heads, mamba_headdim = expand x hidden / mamba heads); other
    model types unchanged."""
    if str(config.get("model_type", "")) != "zamba2":
        return config
    hidden, heads, expand, mamba_heads = (config.get(key) for key in ("hidden_size", "num_attention_heads",
                                                                      "mamba_expand", "n_mamba_heads"))
    derived: Dict[str, Any] = {}
    if isinstance(hidden, int) and positive_int(hidden) and isinstance(heads, int) and positive_int(heads):
        derived["attention_head_dim"] = 2 * hidden // heads
    if isinstance(hidden, int) and positive_int(hidden) and isinstance(expand, int) and positive_int(expand) \
            and isinstance(mamba_heads, int) and positive_int(mamba_heads):
        derived["mamba_headdim"] = expand * hidden // mamba_heads
    return {**derived, **{key: value for key, value in config.items() if value is not None}}


_ZAMBA2_TYPES = {"mamba": 0, "linear_attention": 0, "hybrid": 1}


def zamba2_layers(config: Dict[str, Any], layers: int) -> Optional[Tuple[Span, ...]]:
    """Zamba2 (vLLM's zamba2.py): a mamba2 mixer in every layer, and beside each "hybrid" layer of
    `layers_block_type` the shared attention block with a KV cache of its own."""
    types = config.get("layers_block_type")
    if not isinstance(types, list) or len(types) != layers or any(kind not in _ZAMBA2_TYPES for kind in types):
        return None
    return (State(),) * layers + (None,) * sum(_ZAMBA2_TYPES[kind] for kind in types)


def chunked_layers(config: Dict[str, Any], layers: int, chunk: Chunk) -> Optional[Tuple[Span, ...]]:
    """Llama 4 (vLLM's llama4.py): chunked local attention on every layer with RoPE; `no_rope_layers`
    names them (0: NoPE, full attention), else one NoPE layer every `no_rope_layer_interval` (4), as
    transformers fills it in. None for another model type (its rules are not known here)."""
    if str(config.get("model_type", "")) not in ("llama4", "llama4_text"):
        return None
    flags = config.get("no_rope_layers")
    if isinstance(flags, list) and flags:
        if len(flags) != layers or any(flag not in (0, 1) or isinstance(flag, bool) for flag in flags):
            return None
        return tuple(chunk if flag else None for flag in flags)
    interval = config.get("no_rope_layer_interval", 4)
    if not positive_int(interval):
        return None
    return tuple(None if (i + 1) % interval == 0 else chunk for i in range(layers))
