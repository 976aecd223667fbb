"""A tiny random-init reader/evaluator checkpoint for tests: 2 layers, 32 hidden, character vocab.

    PYTHONPATH=plugin python -m onnx_models.train.tiny /tmp/tiny-checkpoint

Built entirely in code (no download): a BERT config, a WordPiece tokenizer whose vocab is
single characters (so any ASCII text tokenizes, with exact offsets), and seeded weights.
"""

from __future__ import annotations

import string
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenizers import Tokenizer
    from transformers import BertConfig

__all__ = ["make_tiny_checkpoint", "tiny_config"]

_SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _vocab() -> list[str]:
    chars = string.ascii_lowercase + string.digits
    return _SPECIAL + list(chars) + [f"##{c}" for c in chars] + list(string.punctuation)


def _tokenizer(vocab: list[str]) -> Tokenizer:
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    tokenizer = Tokenizer(
        WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]", max_input_chars_per_word=100)
    )
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    return tokenizer


def tiny_config() -> BertConfig:
    from transformers import BertConfig

    return BertConfig(  # type: ignore[no-untyped-call]  # transformers' config classes are untyped
        vocab_size=len(_vocab()),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )


def make_tiny_checkpoint(directory: Path, *, seed: int = 0) -> Path:
    import torch

    from onnx_models.train.modeling import ReaderEvaluatorModel

    directory.mkdir(parents=True, exist_ok=True)
    _tokenizer(_vocab()).save(str(directory / "tokenizer.json"))
    torch.manual_seed(seed)
    ReaderEvaluatorModel(tiny_config()).eval().save(directory, directory)
    return directory


if __name__ == "__main__":
    print(make_tiny_checkpoint(Path(sys.argv[1])))
