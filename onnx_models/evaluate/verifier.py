"""The exported verifier on ``data.verifier_pairs``' pairs: judge, measure, and choose its thresholds.

    python -m onnx_models.evaluate.verifier --model-dir onnx_models/verifier [--dry-run]

Thresholds are chosen on the *choose* side alone (VitaminC's choosing titles and the held-out
training articles' contrastive claims), as every constant of the project is: ``entailed_above``
is the lowest probability at which at most ``MAX_FALSE_KEPT`` of the refuted VitaminC claims and
of the swapped-fact claims are kept, and ``contradicted_above`` the lowest at which at most
``MAX_FALSE_KEPT`` of the entailed ones would be flagged contradicted. They go to ``verifier.json``
(``--dry-run`` prints them only). ``bench/verification.py`` reports on the report side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from answerbox.models.verifier import THRESHOLDS_FILE, ClaimVerifier, load_verifier
from answerbox.processors.text.claims import Entailment, entailments

from onnx_models.data.squad import default_tarball
from onnx_models.data.verifier_pairs import CONTRADICTED, ENTAILED, LABELS, Pair, contrastive_pairs, vitaminc_pairs

log = logging.getLogger("answerbox.verifier_eval")

MAX_FALSE_KEPT = 0.08  # below the 10% a refuted or swapped claim may be kept, for the report side's noise
_CHUNK = 256


@dataclass(frozen=True, slots=True)
class Judged:
    pairs: list[Pair]
    found: list[Entailment]
    seconds: float  # the verifier's wall time for them all, batched

    def kept(self, threshold: float, *, label: int | None = None, kind: str | None = None) -> float:
        chosen = [
            e.entailed >= threshold
            for p, e in zip(self.pairs, self.found, strict=True)
            if (label is None or p.label == label) and (kind is None or p.kind == kind)
        ]
        return sum(chosen) / len(chosen) if chosen else float("nan")

    def auroc(self) -> float:
        """How well P(entailment) tells the entailed claims from the contradicted ones."""
        pos = np.array([e.entailed for p, e in zip(self.pairs, self.found, strict=True) if p.label == ENTAILED])
        neg = np.array([e.entailed for p, e in zip(self.pairs, self.found, strict=True) if p.label == CONTRADICTED])
        if not len(pos) or not len(neg):
            return float("nan")
        ranks = np.concatenate([pos, neg]).argsort().argsort() + 1.0
        return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))

    def accuracy(self) -> float:
        """3-way, reading neutral as neither entailed nor contradicted above one half."""
        right = 0
        for p, e in zip(self.pairs, self.found, strict=True):
            guess = (
                ENTAILED if e.entailed >= 0.5 else CONTRADICTED if e.contradicted >= 0.5 else LABELS.index("neutral")
            )
            right += guess == p.label
        return right / len(self.pairs)


def judge(verifier: ClaimVerifier, pairs: Sequence[Pair]) -> Judged:
    async def run() -> list[Entailment]:
        found: list[Entailment] = []
        for first in range(0, len(pairs), _CHUNK):
            chunk = pairs[first : first + _CHUNK]
            found += await entailments(verifier, [(p.evidence, p.claim) for p in chunk])
        verifier.close()
        return found

    started = time.perf_counter()
    found = asyncio.run(run())
    return Judged(list(pairs), found, time.perf_counter() - started)


def sample(pairs: Sequence[Pair], limit: int) -> list[Pair]:
    """A fixed sample of ``limit`` pairs (0: all), so every run judges the same ones."""
    return list(pairs) if not limit or limit >= len(pairs) else random.Random(0).sample(list(pairs), limit)


def verifier_of(model_dir: Path) -> ClaimVerifier:
    return load_verifier(model_dir, providers=["CPUExecutionProvider"], intra_op_threads=0, max_batch=32, max_wait_s=0)


def lowest(candidates: Sequence[float], ok: Callable[[float], bool]) -> float:
    return next((t for t in candidates if ok(t)), candidates[-1])


def choose(vitaminc: Judged, made: Judged) -> dict[str, float]:
    grid = [round(x, 3) for x in np.linspace(0.05, 0.99, 189)]
    entailed_above = lowest(
        grid,
        lambda t: (
            vitaminc.kept(t, label=CONTRADICTED) <= MAX_FALSE_KEPT and made.kept(t, kind="swapped") <= MAX_FALSE_KEPT
        ),
    )

    def flagged(judged: Judged, t: float) -> float:
        rows = [e.contradicted >= t for p, e in zip(judged.pairs, judged.found, strict=True) if p.label == ENTAILED]
        return sum(rows) / len(rows)

    contradicted_above = lowest(
        grid, lambda t: flagged(vitaminc, t) <= MAX_FALSE_KEPT and flagged(made, t) <= MAX_FALSE_KEPT
    )
    return {"entailed_above": entailed_above, "contradicted_above": contradicted_above}


def summary(name: str, judged: Judged, threshold: float) -> dict[str, object]:
    kinds = sorted({p.kind for p in judged.pairs})
    return {
        "set": name,
        "pairs": len(judged.pairs),
        "kept_by_label": {LABELS[label]: round(judged.kept(threshold, label=label), 4) for label in range(3)},
        "kept_by_kind": {kind: round(judged.kept(threshold, kind=kind), 4) for kind in kinds},
        "auroc": round(judged.auroc(), 4),
        "accuracy_3way": round(judged.accuracy(), 4),
        "ms_per_claim": round(1000 * judged.seconds / len(judged.pairs), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, default=Path("onnx_models/verifier"))
    parser.add_argument("--data", type=Path, default=default_tarball())
    parser.add_argument("--limit", type=int, default=3000, help="pairs of each set judged (0: all)")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    vitaminc = judge(verifier_of(args.model_dir), sample(vitaminc_pairs(args.data)["choose"], args.limit))
    made = judge(verifier_of(args.model_dir), sample(contrastive_pairs(args.data)["choose"], args.limit))
    chosen = choose(vitaminc, made)
    record = {
        "labels": list(LABELS),
        **chosen,
        "calibration": {
            "command": "python -m onnx_models.evaluate.verifier --model-dir onnx_models/verifier",
            "rule": f"lowest thresholds keeping at most {MAX_FALSE_KEPT:.0%} false on the choose side",
            "choose": [
                summary("vitaminc", vitaminc, chosen["entailed_above"]),
                summary("contrastive", made, chosen["entailed_above"]),
            ],
        },
    }
    print(json.dumps(record, indent=2))
    if not args.dry_run:
        (args.model_dir / THRESHOLDS_FILE).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
