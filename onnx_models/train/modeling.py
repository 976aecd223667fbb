"""The PyTorch reader/evaluator: one BERT encoder, a span head and a relevance head (DPR-reader style).

Needs torch and transformers (the ``export`` extra); the serving path never imports this.
A checkpoint is a HF-style directory: ``config.json`` (the encoder's config plus
``answerbox_task``), ``model.safetensors`` (encoder and heads) and the tokenizer files.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig

__all__ = [
    "READER_EVALUATOR_TASK",
    "TOKENIZER_FILES",
    "WEIGHTS_FILE",
    "ReaderEvaluatorModel",
    "is_reader_evaluator_checkpoint",
]

READER_EVALUATOR_TASK = "reader-evaluator"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
WEIGHTS_FILE = "model.safetensors"


class ReaderEvaluatorModel(nn.Module):
    def __init__(self, config: PretrainedConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = AutoModel.from_config(config, add_pooling_layer=False)  # type: ignore[no-untyped-call]
        hidden = int(config.hidden_size)
        self.qa_outputs = nn.Linear(hidden, 2)
        self.relevance = nn.Linear(hidden, 1)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        hidden = self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        start_logits, end_logits = self.qa_outputs(hidden).unbind(dim=-1)
        relevance_logits = self.relevance(hidden[:, 0]).squeeze(-1)
        return start_logits, end_logits, relevance_logits

    @classmethod
    def from_encoder(cls, encoder_dir: Path) -> ReaderEvaluatorModel:
        """Pretrained encoder weights, freshly initialised heads."""
        config = AutoConfig.from_pretrained(encoder_dir)
        model = cls(config)
        model.encoder = AutoModel.from_pretrained(encoder_dir, config=config, add_pooling_layer=False)
        for head in (model.qa_outputs, model.relevance):
            nn.init.normal_(head.weight, std=config.initializer_range)
            nn.init.zeros_(head.bias)
        return model

    @classmethod
    def load(cls, checkpoint_dir: Path) -> ReaderEvaluatorModel:
        config = AutoConfig.from_pretrained(checkpoint_dir)
        model = cls(config)
        model.load_state_dict(load_file(str(checkpoint_dir / WEIGHTS_FILE)))
        return model.eval()

    def save(self, checkpoint_dir: Path, tokenizer_dir: Path) -> None:
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
        self.config.answerbox_task = READER_EVALUATOR_TASK
        self.config.save_pretrained(checkpoint_dir)
        state = {k: v.detach().contiguous() for k, v in self.state_dict().items()}
        save_file(state, str(checkpoint_dir / WEIGHTS_FILE))
        if tokenizer_dir != checkpoint_dir:
            copy_files(tokenizer_dir, checkpoint_dir, TOKENIZER_FILES)


def copy_files(source: Path, target: Path, names: tuple[str, ...]) -> None:
    """Copy those of ``names`` that ``source`` holds into ``target`` (a checkpoint's config and
    tokenizer files, which travel beside its weights)."""
    for name in names:
        if (source / name).is_file():
            shutil.copyfile(source / name, target / name)


def is_reader_evaluator_checkpoint(checkpoint_dir: Path) -> bool:
    config = AutoConfig.from_pretrained(checkpoint_dir)
    return getattr(config, "answerbox_task", None) == READER_EVALUATOR_TASK
