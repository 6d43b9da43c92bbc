"""vLLM's log lines and error texts, 0.4.0-0.34.0, as regular expressions (vllm-strings.md)."""

from __future__ import annotations

import re

V1_TOKENS = re.compile(r"(?:\b[A-Z]+(?: \+ host)? )?KV cache size: ([\d,]+) tokens")
CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
BLOCKS = re.compile(
    r"^# (?:GPU|CPU|TPU|HPU|CUDA|XLA|XPU|cuda|rocm|cpu|xpu|tpu|hpu) blocks: (\d+)(?:, # CPU blocks: \d+)?"
)
OPENVINO_BLOCKS = re.compile(r"OpenVINO \S+: # device blocks: (\d+)")
BLOCK_OVERRIDE = re.compile(
    r"Overriding num_gpu_blocks=\d+ with num_gpu_blocks_override=(\d+)"
    r"|Replacing profiled num_gpu_blocks=\d+ with forced_num_gpu_blocks=(\d+)"
)
EXTENDED_BLOCKS = re.compile(r"Extended KV cache to (\d+) blocks \(([\d.]+) GiB\)")
AVAILABLE_KV = re.compile(r"Available KV cache memory: (-?[\d.]+) GiB")
V0_PROFILE_KV = re.compile(r"the rest of the memory reserved for KV Cache is (-?[\d.]+) ?GiB")
V0_PROFILE_TOTAL = re.compile(
    r"total_gpu_memory \(([\d.]+) ?GiB\) x gpu_memory_utilization \(([\d.]+)\) = ([\d.]+) ?GiB"
)
V0_PROFILE_PARTS = re.compile(
    r"model weights take (-?[\d.]+) ?GiB; non_torch_memory takes (-?[\d.]+) ?GiB; "
    r"PyTorch activation peak memory takes (-?[\d.]+) ?GiB"
)
V0_064_PROFILE = re.compile(
    r"total_gpu_memory=([\d.]+)GiB initial_memory_usage=([\d.]+)GiB peak_torch_memory=([\d.]+)GiB"
    r".*non_torch_memory=([\d.]+)GiB kv_cache_size=(-?[\d.]+)GiB gpu_memory_utilization=([\d.]+)"
)
CPU_KV_SET = re.compile(r"(?:Explicitly|Auto) set \((-?[\d.]+)/([\d.]+)\) GiB for KV cache on node \d+")
CPU_KV_DEFAULT = re.compile(r"VLLM_CPU_KVCACHE_SPACE not set\. Using ([\d.]+) GiB for KV cache")
KV_BYTES_SET = re.compile(r"reserved (-?[\d.]+) ?GiB memory for KV Cache as specified by kv_cache_memory_bytes")
FREE_MEMORY_INFO = re.compile(
    r"Free memory on device(?: \S+)? \(([\d.]+)/([\d.]+) GiB\) on startup\. "
    r"Desired GPU memory utilization is \(([\d.]+), ([\d.]+) GiB\)"
)
USAGE_INFO = re.compile(
    r"Actual usage is (-?[\d.]+) GiB for weight, (-?[\d.]+) GiB for peak activation, (-?[\d.]+) GiB for "
    r"non-torch memory, and (-?[\d.]+) GiB for CUDAGraph memory"
)
USAGE_INFO_034 = re.compile(
    r"Actual usage is (-?[\d.]+) GiB for consumed memory \(weights \+ non-torch\), (-?[\d.]+) GiB for peak "
    r"activation, and (-?[\d.]+) GiB for CUDAGraph memory"
)
KV_IN_USE_BYTES = re.compile(r"Current kv cache memory in use is (\d+) bytes")
WEIGHTS_LOADED = re.compile(
    r"(?:Model loading took|Loading model weights took(?: in total)?|Loading weights took) (-?[\d.]+) ?Gi?B"
)
AUTOFIT_REDUCED = re.compile(
    r"Auto-fit max_model_len: reduced from (\d+) to (\d+)"
    r"|--max-model-len auto reduced max_model_len from (\d+) to (\d+)"
)
AUTOFIT_FULL = re.compile(r"Auto-fit max_model_len: full model context length (\d+) fits")
BATCHED_TOKENS = re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)")
USING_MAX_LEN = re.compile(r"Using max model len (\d+)")
BANNER = re.compile(r"Initializing an? (?:(V[01]) )?LLM engine \(v([^)\s]+)\)")
V0_FALLBACK = re.compile(r"is not supported by the V1 Engine\. Falling back to V0")

# --- error lines (the root causes; see classify.py for their priority) ----------------------------

V1_TOO_LONG = re.compile(
    r"To serve at least one request with the models?'s max seq len \((\d+)\), "
    r"\((-?[\d.]+) Gi?B KV cache is needed, which is larger than the available KV cache memory "
    r"\((-?[\d.]+) Gi?B\)\.(?:\s*Based on the available memory,(?:\s*the estimated maximum model length is (\d+)\.)?)?"
)
V0_TOO_LONG = re.compile(
    r"The model's max seq len \((\d+)\) is larger than the maximum number of tokens that can be "
    r"stored in KV cache \((\d+)\)"
)
NO_KV_MEMORY = re.compile(
    r"No available memory for the cache blocks|Cannot auto-fit max_model_len: not enough GPU memory"
    r"|CUDA graph capture and warmup left no memory for the KV cache"
)
DERIVED_MAX = re.compile(
    r"User-specified max_model_len \((\d+)\) is greater than the derived max_model_len "
    r"\((\w+)=([\d.]+|None) or model_max_length=(\S+?) in model's config\.json\)"
)
FREE_MEMORY_SHORT = re.compile(
    r"Free memory on device(?: \S+)? \(([\d.]+)/([\d.]+) GiB\) on startup is less than "
    r"(?:desired GPU memory utilization|the engine's budget[^(]*?)\s*\(([\d.]+), ([\d.]+) GiB\)"
    r"|Externally held weights on device \S+ \(([\d.]+)/([\d.]+) GiB\) exceed the desired GPU memory"
    r"|Available memory on node \d+ \(([\d.]+)/([\d.]+) GiB\) on kv cache allocation is less than"
    r"|Error in memory profiling\."
)
OOM = re.compile(
    r"torch\.(?:cuda\.)?OutOfMemoryError|CUDA out of memory|CUDA error: out of memory"
    r"|CUBLAS_STATUS_ALLOC_FAILED|HIP out of memory|XPU out of memory|Cuda failure 'out of memory'"
    r"|DefaultCPUAllocator: can't allocate memory|\bMemoryError\b"
)
NO_DEVICE = re.compile(
    r"Failed to infer device type|No CUDA GPUs are available|Found no NVIDIA driver on your system"
    r"|no CUDA-capable device is detected|CUDA initialization is blocked|Device string must not be empty"
    r"|CUDA driver initialization failed|NVIDIA driver on your system is too old"
)
MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.\-]+)'")
"""A traceback's last line where a Python module vLLM needs (for this model: torchvision for a multimodal
processor, a kernel package) is not installed; vLLM then often reports only that the architecture 'failed
to be inspected' inside a ModelConfig validation error (tenstorrent/vllm-tt-plugin#107). The repr form of
vLLM's own optional-import warnings ('ModuleNotFoundError("No module named ...")') does not match."""
NO_TRITON = re.compile(r"module 'triton(?:\.\w+)*' has no attribute '(\w+)'")
"""A kernel the model needs calls Triton where vLLM has only its placeholder module (vllm/triton_utils: the
CPU backend without triton-cpu, "Triton is installed, but doesn't include CPU backend. Disabling Triton."):
vLLM 0.32's OLMo hybrid gated DeltaNet layers ("module 'triton' has no attribute 'set_allocator'")."""
NO_KERNEL = re.compile(r"'_OpNamespace' '(\w+)' object has no attribute '(\w+)'")
"""A kernel the model calls is not compiled into this vLLM build: vLLM 0.32's CPU build has no
_moe_C.topk_softmax, which LongCat-Flash's softmax router calls at the first request."""
PLATFORM_UNSUPPORTED = re.compile(r"NotImplementedError: (.{1,160}? not (?:yet )?supported on (?:the )?"
                                  r"(?:CPU|XPU|TPU|HPU|ROCm)\b.*)")
"""vLLM's platform cannot run a part of this model ("MLA is not supported on CPU." from vLLM 0.26's CPU
backend for DeepSeek-V2; "Sparse Attention is not supported on CPU."): no length serves there."""
UNSUPPORTED_ARCHITECTURE = re.compile(r"Model architectures? (\[[^\]]{1,300}\]|\w+) (are not supported for now"
                                      r"|was supported in vLLM until v[\d.]+|is not supported in-tree anymore\."
                                      r" Please install the plugin at \S+)")
"""The installed vLLM's model registry does not run the config's architecture (registry.py's
_raise_for_unsupported, 0.4-0.32: unknown, removed after a version, or moved to a plugin); the same line
lists every supported architecture after it, which is not worth repeating."""
NO_FALLBACK_LAYER = re.compile(r"Layer (\d+(?: \(\w+\))?) does not dispatch through the Transformers attention"
                               r" interface and vLLM has no other way to handle it")
"""vLLM has no implementation of the model and its Transformers backend cannot run one of its layers
(vLLM 0.32 on Bamba, whose implementation it dropped after 0.23: "Layer 0 (linear_attention) ...")."""
ENVIRONMENT_WORDS = (
    (MISSING_MODULE, "the Python module {1!r} is not installed where vLLM runs (ModuleNotFoundError);"
                     " install it into that environment ({python}) and search again"),
    (NO_TRITON, "this model's kernels need Triton, which vLLM has not where it runs ({python}; its"
                " placeholder lacks {1!r}): search where vLLM runs with Triton (a GPU, or triton-cpu)"),
    (NO_KERNEL, "this model calls the kernel {1}.{2}, which the vLLM build where it runs ({python}) does"
                " not have: search where vLLM is built with it (a GPU build)"),
    (PLATFORM_UNSUPPORTED, "vLLM where it runs ({python}) cannot run this model on its device: {1!r};"
                           " search where vLLM supports it (a GPU)"),
    (UNSUPPORTED_ARCHITECTURE, "vLLM where it runs ({python}) does not run this model: architecture {1} {2};"
                               " search with a vLLM that runs it"),
    (NO_FALLBACK_LAYER, "vLLM where it runs ({python}) has no implementation of this model, and its Transformers"
                        " backend cannot run layer {1}: search with a vLLM that implements the model"),
)
"""What each environment problem means and what to do, by the pattern that recognised it."""
BAD_CONFIG = re.compile(
    r"must be divisible by tensor parallel size|must be divisible by pipeline parallel size"
    r"|GPU memory utilization must be less than 1\.0|\d+ validation errors? for \w+"
    r"|got an unexpected keyword argument|is smaller than max_model_len \(\d+\)\. This effectively limits"
    r"|Unknown quantization method|is not supported for the selected|exceeds the total number of available GPUs"
    r"|No common block size for"
)
V0_BLOCK_MANAGER = re.compile(r"exceeds the capacity of block_manager|is too long and exceeds limit of \d+")
OOM_AFTER_KV = re.compile(r"occurred when warming up|CUDA graph|graph captur", re.I)
"""vLLM's own out-of-memory wrappers that name a stage after the KV cache was allocated (sampler or pooler
warm-up, CUDA graph capture): the utilization is too high, not the weights too big."""
OOM_ALLOC = re.compile(r"Tried to allocate ([\d.]+) ?([KMGT]i?B|bytes)")
OOM_FREE = re.compile(r"of which ([\d.]+) ?([KMGT]i?B|bytes) is free|([\d.]+) ?([KMGT]i?B|bytes) free;")
UNIT_BYTES = {"bytes": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
         "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}  # torch prints binary units
NONDETERMINISTIC = re.compile(
    r"NCCL error|DistNetworkError|EADDRINUSE|Address already in use|Connection reset by peer"
    r"|an illegal memory access was encountered|Triton Error \[CUDA\]|unspecified launch failure"
    r"|uncorrectable ECC error|CUDA error: unknown error"
)
KV_SIZED = (V1_TOKENS, BLOCKS, OPENVINO_BLOCKS, EXTENDED_BLOCKS, AVAILABLE_KV, V0_PROFILE_KV, V0_064_PROFILE,
            CPU_KV_SET, KV_BYTES_SET)
"""Lines that say the KV cache has been sized: an OOM after them is not about weights or profiling."""

SERVER_FATAL = re.compile(
    r"Engine core initialization failed|EngineCore failed to start|Engine process failed to start"
    r"|Application startup failed|RuntimeError: Engine core")
"""A server log line after which the OpenAI server will not become ready (it may take a while to exit)."""
