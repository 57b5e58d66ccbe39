"""Create a tiny, randomly initialised Qwen3-architecture model with a byte-level BPE tokenizer trained
offline on the exported SFT records — no download. Run with the LLaMA-Factory job environment's Python:

    .venv-train/bin/python tests/support/tiny_qwen3.py EXPORT_DIR OUT_DIR

The tokenizer carries Qwen's special tokens (``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``) as single
tokens, so LLaMA-Factory's ``qwen`` template works on it unchanged. Same export = same files (seeded).
"""

from __future__ import annotations

import sys
from pathlib import Path

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def texts(export_dir: Path):
    """Every message of the exported chat records (the text the model is trained and prompted on)."""
    import pyarrow.parquet as pq

    for shard in sorted((export_dir / "sft" / "chat").glob("*.parquet")):
        for messages in pq.read_table(shard, columns=["messages"]).column("messages").to_pylist():
            for message in messages:
                yield message["content"]


def main(export_dir: Path, out: Path, vocab_size: int = 4096) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(texts(export_dir), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL[1:],
        model_max_length=32768,
    )
    tokenizer.save_pretrained(out)

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        torch_dtype="float32",
    )
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id)
    model.save_pretrained(out)
    print(f"tiny Qwen3: {sum(p.numel() for p in model.parameters())} parameters, vocabulary {len(tokenizer)} -> {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
