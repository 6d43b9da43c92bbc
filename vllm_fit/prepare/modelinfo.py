"""Facts about a model read from its config.json, without importing transformers or vLLM."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

from ..errors import BadInput
from ..files.reading import check_nesting, read_input_bytes
from ..logs.kv_groups import Span
from ..logs.regime import Version
from .attention import (
    cached_kv_heads,
    kv_bytes_per_token,
    latent_attention,
    layer_kv_bytes_per_token,
    layer_windows,
    sliding_window,
    text_config,
    unmodelled_attention,
    version_unmodelled,
)
from .config_basics import DTYPE_BYTES as _DTYPE_BYTES
from .config_basics import model_dtype_bytes
from .config_checks import check_config
from .config_weights import config_weights_bytes
from .hybrid_layers import mamba2_groups, mamba_state, ssm_dtype_bytes, state_family
from .layer_pages import layer_page_shapes
from .maxlen import MAX_CONFIG_BYTES, YARN_UNSCALED_SINCE, derived_max_len, max_len_source, tokenizer_max_len

__all__ = ["ModelInfo", "derived_max_len", "kv_bytes_per_token", "layer_kv_bytes_per_token", "layer_windows",
           "read_model_info", "sliding_window"]

@dataclass(frozen=True)
class ModelInfo:
    """What config.json says about length, heads and KV cost. None where it does not say."""

    path: Optional[Path]
    derived_max_len: Optional[int]
    num_attention_heads: Optional[int]
    kv_bytes_per_token: Optional[int]
    config_sha256: Optional[str]
    num_kv_heads: Optional[int] = None
    sliding_window: Optional[int] = None
    """The window of a sliding-window model that really uses it (None: full attention)."""

    dtype_bytes: Optional[int] = None
    """Bytes of one element in the model's dtype (the KV cache's, unless an engine argument says)."""
    quantization: Optional[str] = None
    """config.json's `quantization_config.quant_method` ("unknown" when it has no method)."""
    weights_bytes: Optional[int] = None
    """The weight files' size on disk (local models only)."""
    unscaled_max_len: Optional[int] = None
    """The maximum vLLM 0.30+ derives where it differs (a YaRN model: the factor not applied)."""
    config_weights_bytes: Optional[int] = None
    """The dense weights config.json implies (embeddings, attention, gated MLP, experts) in its dtype;
    None for quantized or unusual configs. An estimate, for the diagnosis only."""
    layer_windows: Optional[Tuple[Span, ...]] = None
    """Each layer's span (None: full attention; a sliding window; a Chunk) as config.json says; None when
    it cannot say."""
    layer_kv_bytes_per_token: Optional[int] = None
    """KV bytes one token takes in one layer (every layer alike), for vLLM's per-group pages."""
    layer_page_shapes: Optional[Tuple[Tuple[int, int], ...]] = None
    """Where layers' pages differ (Gemma 4's global layers): per cached layer, its KV heads and the bytes a
    token takes per KV head."""
    max_len_source: str = "config.json"
    """Where the model's maximum came from, for messages."""
    unmodelled_attention: Optional[str] = None
    """The attention kind whose KV cache config.json does not let this tool cost (MLA, mamba ...), in words."""
    latent_attention: bool = False
    """Every layer caches MLA's one latent (DeepSeek V2/V3): the same on every tensor-parallel rank."""
    model_type: Optional[str] = None
    """config.json's model_type (of the language model)."""
    mamba_state: Optional[Tuple[int, int]] = None
    """One state layer's state (Granite 4.0-H, Nemotron-H, Qwen3-Next): its conv state's bytes and its SSM
    state's elements, whose size vLLM raises the attention block to hold."""
    mamba_groups: Tuple[int, int] = (0, 0)
    """Mamba2's B/C groups and the conv bytes one adds: ranks that split fewer groups than there are ranks each
    hold whole ones (vLLM's extra_groups_for_head_shards)."""
    ssm_dtype_bytes: Optional[int] = None
    """The SSM state's element size where the model fixes it (Nemotron-H: float32); None: the engine's."""
    state_family: Optional[str] = None
    """The family of its state layers (mamba2 by model type, gated DeltaNet ...), for how many blocks a
    request's state takes; None without state layers."""

    def for_version(self, version: Optional[Version], env: Optional[Mapping[str, str]] = None) -> ModelInfo:
        """These facts as the installed vLLM derives them (an unknown version counts as current)."""
        model = self
        unmodelled = version_unmodelled(self.model_type, self.latent_attention, version, env or {})
        if unmodelled is not None:  # a layout this tool does not cost
            model = dataclasses.replace(self, kv_bytes_per_token=None, layer_kv_bytes_per_token=None,
                                        latent_attention=False, unmodelled_attention=unmodelled)
        if model.unscaled_max_len is None or (version is not None and version < YARN_UNSCALED_SINCE):
            return model
        return dataclasses.replace(model, derived_max_len=model.unscaled_max_len, unscaled_max_len=None)

    def _per_rank(self, per_token: int, tensor_parallel_size: int) -> int:
        """KV bytes on one rank: KV heads split across ranks (replicated when fewer); MLA's latent whole."""
        if not self.num_kv_heads or self.latent_attention:
            return per_token
        return per_token // self.num_kv_heads * heads_on_rank(self.num_kv_heads, tensor_parallel_size)

    def layer_kv_bytes_per_rank(self, tensor_parallel_size: int) -> Optional[int]:
        """KV bytes one token takes in one layer on one rank, in the model's dtype (where layers differ, in
        the layer with the largest page: every page is raised to it)."""
        pages = self._layer_pages(tensor_parallel_size)
        if pages:
            return max(pages)
        per_layer = self.layer_kv_bytes_per_token
        return self._per_rank(per_layer, tensor_parallel_size) if per_layer else None

    def _layer_pages(self, tensor_parallel_size: int) -> Tuple[int, ...]:
        """Per cached layer, KV bytes a token takes on one rank (KV heads split, replicated when fewer)."""
        return tuple(heads_on_rank(heads, tensor_parallel_size) * per_head
                     for heads, per_head in self.layer_page_shapes or ())

    def page_scales(self, tensor_parallel_size: int) -> Optional[Tuple[int, ...]]:
        """Per cached layer, how many times its page fits in the largest (vLLM raises the smaller pages'
        block by that factor); None where the pages are alike, or one does not divide the largest (vLLM
        refuses such a model)."""
        pages = self._layer_pages(tensor_parallel_size)
        if not pages or any(max(pages) % page for page in pages):
            return None
        return tuple(max(pages) // page for page in pages)

    def plain_attention(self, v1: bool) -> bool:
        """Whether block counts translate into lengths: full attention with a known page, or a sliding
        window on V0 (its start check counts every token; its block manager caps a prompt at the window).
        V1 checks and serves a sliding window in its own way, so there only vLLM's estimates count."""
        return self.kv_bytes_per_token is not None and (self.sliding_window is None or not v1)

    @property
    def estimated_weights_bytes(self) -> Optional[int]:
        """The weights' size: the files on disk where there are any, else config.json's estimate."""
        return self.weights_bytes or self.config_weights_bytes

    def kv_bytes_per_rank(self, tensor_parallel_size: int, engine_args: Optional[Dict[str, Any]] = None
                          ) -> Optional[int]:
        """KV bytes per token on one device: KV heads split across ranks, replicated when fewer, and
        the element size the engine arguments give the cache (kv_cache_dtype=fp8 halves a bf16 one)."""
        if self.kv_bytes_per_token is None:
            return None
        per_token = self.kv_bytes_per_token
        element = kv_element_bytes(engine_args or {})
        if element != "model":
            if element is None or not self.dtype_bytes:
                return None  # a cache dtype this tool does not know: only measured numbers count
            per_token = per_token * element // self.dtype_bytes
        return self._per_rank(per_token, tensor_parallel_size)


def heads_on_rank(kv_heads: int, tensor_parallel_size: int) -> int:
    """KV heads one tensor-parallel rank keeps: split across ranks, replicated where fewer than ranks."""
    return max(1, kv_heads // tensor_parallel_size)


ONE_BYTE_KV_DTYPES = frozenset({"fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"})
"""Cache dtypes that keep each key and value element in one byte and nothing beside it. Not DeepSeek's
fp8_ds_mla (656 bytes a token where the latent has 576 elements: scales and a bf16 rope part) nor the
per-token-head ones (a scale per token and head): their pages are vLLM's own, measured."""


def kv_element_bytes(engine_args: Dict[str, Any]) -> Any:
    """Bytes per KV element that the engine arguments set; "model" when they leave the model's dtype;
    None when they name a dtype or a layout this tool does not know."""
    cache = str(engine_args.get("kv_cache_dtype") or "auto").lower()
    if cache in ONE_BYTE_KV_DTYPES:
        return 1
    if cache != "auto":
        return _DTYPE_BYTES.get(cache)
    dtype = str(engine_args.get("dtype") or "auto").lower()
    return "model" if dtype == "auto" else _DTYPE_BYTES.get(dtype)


def looks_local(model: str) -> bool:
    """True when `model` is meant as a path rather than a hub id like `org/name`."""
    return model.startswith(("/", "./", "../", "~")) or Path(os.path.expanduser(model)).exists()


def hub_cache_dir(model: str, env: Optional[Dict[str, str]] = None) -> Optional[Path]:
    """The cached snapshot of a hub model (`org/name`) on this machine, if one was downloaded."""
    env = dict(os.environ if env is None else env)
    cache = env.get("HF_HUB_CACHE") or os.path.join(
        env.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface"), "hub")
    repo = Path(cache) / ("models--" + model.replace("/", "--"))
    ref = repo / "refs" / "main"
    if not ref.is_file():
        return None
    snapshot = repo / "snapshots" / ref.read_text().strip()
    return snapshot if snapshot.is_dir() else None


def read_model_info(model: str, env: Optional[Dict[str, str]] = None) -> ModelInfo:
    """Read config.json of a local directory or of a hub model's cached snapshot; else all None."""
    path = Path(os.path.expanduser(model))
    if not looks_local(model):
        path = hub_cache_dir(model, env) or path
    config_file = path / "config.json"
    if not os.path.lexists(config_file):
        return ModelInfo(None, None, None, None, None)
    raw = read_input_bytes(config_file, "the model's config.json", limit=MAX_CONFIG_BYTES)
    try:
        # NaN and Infinity parse as Python's json (and so transformers) reads them: hub configs carry
        # `"time_step_limit": [0.0, Infinity]` (mamba2); a number the accounting reads is checked where read
        config = check_nesting(json.loads(raw.decode("utf-8")), str(config_file))
        if not isinstance(config, dict):
            raise ValueError("it is not a JSON object")
        check_config(config)
        text = text_config(config)
        tokenizer = tokenizer_max_len(path)
        derived = derived_max_len(config, tokenizer_max=tokenizer)
        current = derived_max_len(config, YARN_UNSCALED_SINCE, tokenizer)
        kv_per_token = kv_bytes_per_token(config)
        window = sliding_window(config)
        unmodelled = unmodelled_attention(config)
        windows = layer_windows(config) if unmodelled is None else None  # never a layout it cannot cost
        per_layer = layer_kv_bytes_per_token(config)
        page_shapes = layer_page_shapes(config) if windows is not None else None
    except RecursionError:
        raise BadInput("%s is nested too deeply to be a config.json; fix or replace it" % config_file) from None
    except (UnicodeDecodeError, ValueError, TypeError, ZeroDivisionError) as exc:
        raise BadInput("%s is not a config.json vLLM can read (%s); fix or replace it" % (config_file, exc)) from None
    heads, kv_heads = text.get("num_attention_heads"), cached_kv_heads(text)
    return ModelInfo(
        path=path.resolve(),
        derived_max_len=derived,
        num_attention_heads=heads if isinstance(heads, int) else None,
        kv_bytes_per_token=kv_per_token,
        config_sha256=hashlib.sha256(raw).hexdigest(),
        num_kv_heads=kv_heads if isinstance(kv_heads, int) and not isinstance(kv_heads, bool) else None,
        sliding_window=window,
        dtype_bytes=model_dtype_bytes(text),
        quantization=_quantization(config) or _quantization(text),
        weights_bytes=_weights_bytes(path),
        config_weights_bytes=config_weights_bytes(config),
        unscaled_max_len=current if current != derived else None,
        layer_windows=windows,
        layer_kv_bytes_per_token=per_layer,
        layer_page_shapes=page_shapes,
        max_len_source=max_len_source(config, tokenizer),
        unmodelled_attention=unmodelled,
        latent_attention=latent_attention(config),
        mamba_state=mamba_state(config),
        mamba_groups=mamba2_groups(config),
        ssm_dtype_bytes=ssm_dtype_bytes(config),
        state_family=state_family(config),
        model_type=str(text["model_type"]) if isinstance(text.get("model_type"), str) else None,
    )


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def _weights_bytes(folder: Path) -> Optional[int]:
    """The size of the weight files in a model folder."""
    try:
        return sum(f.stat().st_size for f in folder.iterdir() if f.suffix in WEIGHT_SUFFIXES and f.is_file())
    except OSError:
        return None


def _quantization(config: Dict[str, Any]) -> Optional[str]:
    """The quantization method config.json declares, if any."""
    section = config.get("quantization_config")
    if not section:
        return None
    method = section.get("quant_method") if isinstance(section, dict) else None
    return str(method) if method else "unknown"


