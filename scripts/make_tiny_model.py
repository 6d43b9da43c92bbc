"""Make the tiny local Llama that the demo, the tests and the benchmark run on (no model hub needed).

Random weights, 2 layers, 2 KV heads of dimension 32, bfloat16: its KV cache costs exactly 512 bytes
per token, so a KV budget in bytes maps to a known number of 128-token CPU blocks (64 KiB each).
Needs torch, transformers and tokenizers, i.e. run it with the vLLM environment's interpreter.
Usage: python scripts/make_tiny_model.py OUT_DIR   (does nothing when OUT_DIR already holds the model)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

VOCAB_SIZE = 4096
MAX_POSITIONS = 32768
_MARKER = "tiny-model-complete.json"


def _train_tokenizer(out_dir: Path) -> None:
    """Train a byte-level BPE tokenizer on a small built-in text and save it for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=["<s>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    words = ("the model serves tokens from a cache of keys and values on one device " * 8).split()
    corpus = [" ".join(words[i:] + words[:i]) for i in range(len(words))]
    corpus += [f"{n} {n * 7} {n * 13}" for n in range(2000)]
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    fast.save_pretrained(str(out_dir))
    portable(out_dir)


def portable(out_dir: Path) -> None:
    """Name the tokenizer class every transformers version knows (5.x writes "TokenizersBackend", which
    4.x, used by vLLM before 0.20, cannot load)."""
    path = out_dir / "tokenizer_config.json"
    config = json.loads(path.read_text())
    if config.get("tokenizer_class") == "PreTrainedTokenizerFast":
        return  # already portable: never rewrite a file that a running test may be reading
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(config, indent=2) + "\n")
    tmp.replace(path)


def make_tiny_model(out_dir: Path) -> Path:
    """Write the model to out_dir unless a finished one is already there; return out_dir."""
    if (out_dir / _MARKER).exists():
        portable(out_dir)  # a model made before the tokenizer class was portable
        return out_dir
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=MAX_POSITIONS,
        torch_dtype=torch.bfloat16,
        bos_token_id=0,
        eos_token_id=1,
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(str(out_dir), safe_serialization=True)
    _train_tokenizer(out_dir)
    (out_dir / _MARKER).write_text(json.dumps({"kv_bytes_per_token": 512}) + "\n")
    return out_dir


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_tiny_model.py OUT_DIR")
    print(make_tiny_model(Path(sys.argv[1])))
