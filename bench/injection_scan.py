"""False positives of the prompt-injection rule: how many ordinary paragraphs it would take away.

    PYTHONPATH=plugin:. python -m bench.injection_scan

A block that ``addresses_the_model`` supports no citation, snippet or chain node, so each
paragraph it flags in real text is evidence lost. The scan runs the rule over every paragraph
of the squad_shifts files (Wikipedia, New York Times, Amazon reviews, Reddit), none of which
was written to a model, and prints the count per file with the first flagged paragraphs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from answerbox.processors.text.instructions import addresses_the_model

from onnx_models.data.squad import DEV_FILE, TRAIN_FILES, default_tarball, load_squad

FILES = [DEV_FILE, *TRAIN_FILES, "amazon_reviews_v1.0.json", "reddit_v1.0.json"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=default_tarball())
    parser.add_argument("--files", nargs="+", default=FILES)
    parser.add_argument("--show", type=int, default=3, help="flagged paragraphs to print per file")
    args = parser.parse_args()

    by_file: dict[str, list[str]] = {name: [] for name in args.files}
    for paragraph in load_squad(args.files, args.data):  # one pass over the tarball
        by_file[paragraph.id.split("/", 1)[0]].append(paragraph.context)
    report: dict[str, dict[str, Any]] = {}
    for name, contexts in by_file.items():
        flagged = [c for c in contexts if addresses_the_model(c)]
        report[name] = {
            "paragraphs": len(contexts),
            "flagged": len(flagged),
            "examples": [c[:200] for c in flagged[: args.show]],
        }
    total = sum(r["paragraphs"] for r in report.values())
    print(
        json.dumps(
            {"files": report, "paragraphs": total, "flagged": sum(r["flagged"] for r in report.values())}, indent=2
        )
    )


if __name__ == "__main__":
    main()
