"""The objective the options ask for, with what is known of the KV cost before a launch.

The KV model (bytes per token and per layer, the KV cache groups of a model that is not plain
attention, the weights, vLLM's default tokens in flight) lets the search choose its first length
and read lengths off a trial's pool; the objective is the pure search/ class that does the asking.
"""

from __future__ import annotations

from typing import Optional, Tuple

from ..errors import BadInput
from ..logs.kv_groups import KvLayout, candidate_layouts
from ..prepare import Prepared
from ..prepare.hybrid_layers import ALIGNED_STATE_BLOCKS
from ..prepare.modelinfo import kv_element_bytes
from ..prepare.request import ObjectiveKind, Strategy, Via
from ..strategies.base import LengthSpace
from ..strategies.highest import LongestAtHighestUtilization
from ..strategies.knob import Grid, KvModel, utilization_grid
from ..strategies.length import Bisect, Doubling, LengthStrategy, Predict
from ..strategies.memory import LeastMemoryForLength
from ..strategies.objectives import LongestAtFixedMemory, Objective


def kv_model(prepared: Prepared) -> KvModel:
    """What is known about KV cost per device before launching."""
    request, model = prepared.request, prepared.model
    layouts = kv_layouts(prepared)
    per_layer = model.layer_kv_bytes_per_rank(request.tensor_parallel_size)
    return KvModel(bytes_per_token=model.kv_bytes_per_rank(request.tensor_parallel_size, request.engine_args),
                   total_bytes=prepared.devices.preflight.total_bytes, regime=prepared.regime,
                   guess_block_size=prepared.guess_block_size, sequences=request.concurrency,
                   sliding_window=model.sliding_window, weights_bytes=_weights_per_rank(prepared),
                   plain=model.plain_attention(prepared.regime.v1), layout=layouts[0] if layouts else None,
                   layer_bytes_per_token=per_layer if kv_element_bytes(request.engine_args) == "model" else None,
                   in_flight_guess=_in_flight_guess(prepared))


def kv_layouts(prepared: Prepared) -> Tuple[KvLayout, ...]:
    """The KV cache groups vLLM may give a model that is not plain attention (none for plain models:
    their blocks map to lengths directly)."""
    model = prepared.model
    if model.plain_attention(prepared.regime.v1):
        return ()
    scales = model.page_scales(prepared.request.tensor_parallel_size)
    if model.layer_page_shapes and scales is None:
        return ()  # pages that do not divide the largest: a layout vLLM does not form
    return candidate_layouts(model.layer_windows, _state_blocks(prepared), scales)


def _state_blocks(prepared: Prepared) -> Tuple[int, ...]:
    """The pool blocks a request's state may hold in a state layer, the likely count first: one, or what
    vLLM 0.32+ keeps with prefix caching on (its "align" mode: 3 for mamba2, 2 for gated DeltaNet)."""
    aligned = ALIGNED_STATE_BLOCKS.get(prepared.model.state_family or "", 3)
    if prepared.request.engine_args.get("enable_prefix_caching") is not False and prepared.regime.since(0, 32, 0):
        return tuple(dict.fromkeys((aligned, 1, 2, 3)))
    return tuple(dict.fromkeys((1, aligned, 2, 3)))


def _in_flight_guess(prepared: Prepared) -> Optional[int]:
    """max_num_batched_tokens as vLLM defaults it, where known before a launch: the CPU backend's
    (2048 served, 4096 for LLM; no async scheduling), or the engine argument."""
    given = prepared.request.engine_args.get("max_num_batched_tokens")
    if isinstance(given, int) and not isinstance(given, bool) and given > 0 and prepared.regime.cpu:
        return given
    if prepared.regime.cpu:
        return 2048 if prepared.request.via is Via.SERVE else 4096
    return None


def _weights_per_rank(prepared: Prepared) -> Optional[float]:
    """The weights one device holds (files on disk, else config.json's estimate); None when quantized."""
    model = prepared.model
    if model.quantization or prepared.request.engine_args.get("quantization"):
        return None
    weights = model.estimated_weights_bytes
    return weights / prepared.request.tensor_parallel_size if weights else None


def _kv_grid(prepared: Prepared, model: KvModel) -> Grid:
    """KV sizes in granules, up to the device's free memory (or 4x the predicted need on a CPU)."""
    request = prepared.request
    free = prepared.devices.preflight.free_bytes
    need = model.need_bytes(request.target_len or 1, [])
    if free is None and need is None:
        kind = prepared.model.unmodelled_attention
        if prepared.model.path is not None:
            raise BadInput("--search kv-cache-memory: vllm-fit cannot cost the KV cache of %s from config.json yet,"
                           " and with no GPU there is no free memory to bound the search; run it where the GPU is,"
                           " or fix the size with --kv-cache-memory and search the length" % (
                               kind or "this model's attention"))
        raise BadInput("--search kv-cache-memory needs the model's config.json (or a GPU) to bound the search")
    top = free if free is not None else 4 * (need or 0)
    return Grid("kv_cache_memory_bytes", float(request.kv_granularity), 1, int(top // request.kv_granularity))


def length_strategy(strategy: Strategy, space: LengthSpace, use_autofit: bool,
                    first: Optional[int] = None) -> LengthStrategy:
    """The length strategy the option names."""
    if strategy is Strategy.BISECT:
        return Bisect(space)
    if strategy is Strategy.DOUBLING:
        return Doubling(space)
    return Predict(space, use_autofit=use_autofit, first=first)


def objective_for(prepared: Prepared) -> Objective:
    """The objective the options ask for."""
    request, kind = prepared.request, prepared.objective
    if kind in (ObjectiveKind.LEAST_UTILIZATION, ObjectiveKind.LEAST_KV_MEMORY):
        model = kv_model(prepared)
        grid = (_kv_grid(prepared, model) if kind is ObjectiveKind.LEAST_KV_MEMORY
                else utilization_grid(prepared.utilization_cap or request.max_utilization))
        return LeastMemoryForLength(grid, request.target_len or 0, model)
    # without vLLM's auto-fit, where the longest cannot fit, a first length that starts says more
    prior = request.strategy is Strategy.PREDICT and not prepared.use_autofit
    if kind is ObjectiveKind.HIGHEST_UTILIZATION:
        return LongestAtHighestUtilization(
            utilization_grid(prepared.utilization_cap or request.max_utilization),
            lambda: length_strategy(request.strategy, prepared.space, prepared.use_autofit), kv_model(prepared),
            prior=prior)
    first, space = None, prepared.space
    if request.kv_cache_memory is not None:  # a fixed KV size in known pages: its length is known before a launch
        first = kv_model(prepared).length_for_bytes(request.kv_cache_memory, space.lowest, space.highest,
                                                    space.granularity)
    elif request.gpu_memory_utilization is not None and prior:
        first = kv_model(prepared).prior_length(request.gpu_memory_utilization, space.lowest, space.highest,
                                                space.granularity)
    return LongestAtFixedMemory(length_strategy(request.strategy, prepared.space, prepared.use_autofit, first),
                                request.gpu_memory_utilization, request.kv_cache_memory)
