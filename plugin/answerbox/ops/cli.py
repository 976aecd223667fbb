"""The ``answerbox`` command: ``serve``, ``doctor``, ``demo``, ``local-llm``, ``threshold`` and ``models``."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import time
from pathlib import Path

from answerbox import __version__
from answerbox.core.contract import CONTRACT_VERSION
from answerbox.ops.children import PortInUseError, interrupt_on_sigterm

__all__ = ["main"]


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from answerbox.app import create_app
    from answerbox.core.config import Settings
    from answerbox.server import uvicorn_config

    settings = Settings.load(args.config)
    server = uvicorn.Server(uvicorn_config(create_app(settings), settings, log_level=args.log_level))
    # uvicorn re-raises the signal that stopped it once it has shut down cleanly (as uvicorn.run
    # does, a clean stop exits 0).
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    return 0 if server.started else 3


def _doctor(args: argparse.Namespace) -> int:
    import asyncio

    from answerbox.core.config import Settings
    from answerbox.doctor import diagnose

    if not args.verbose:
        # The report says what failed and why, one line a check: the clients' own logs (a
        # traceback for an OpenSearch that is down) only with --verbose.
        logging.disable(logging.WARNING)
    findings = asyncio.run(diagnose(Settings.load(args.config)))
    for finding in findings:
        print(finding.line())
    return 1 if any(f.status == "fail" for f in findings) else 0


def _demo(args: argparse.Namespace) -> int:
    from answerbox.ops.embedded import run_demo

    return run_demo(
        port=args.port, query=args.query, keep_running=not args.once, with_llm=not args.no_llm, llm_port=args.llm_port
    )


def _local_llm(args: argparse.Namespace) -> int:
    from answerbox.ops.embedded import local_llm

    with local_llm(args.port, args.threads) as url:
        # test.sh waits for this line: it names the server this process started.
        print(f"local LLM (SmolLM2-135M-Instruct via llama.cpp) at {url}", flush=True)
        while True:
            time.sleep(3600)


def _threshold(args: argparse.Namespace) -> int:
    from answerbox.core.errors import ConfigError
    from answerbox.ops.thresholds import run

    user, _, password = (args.user or "").partition(":")
    try:
        chosen, shown = run(
            args.url,
            args.index,
            args.pipeline,
            args.questions,
            field=args.field,
            auth=(user, password) if args.user else None,
            precision=args.precision,
            z=args.z,
            min_answered=args.min_answers,
        )
    except (ConfigError, OSError) as exc:
        print(f"answerbox threshold: {exc}", file=sys.stderr)
        return 2
    print(shown)
    return 0 if chosen is not None else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="answerbox", description=__doc__)
    parser.add_argument(
        "--version", action="version", version=f"answerbox {__version__} (response contract {CONTRACT_VERSION})"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the proxy in front of OpenSearch")
    serve.add_argument("--config", type=Path, help="YAML settings file (default: $ANSWERBOX_CONFIG)")
    serve.add_argument("--log-level", default="info")
    serve.set_defaults(run=_serve)

    doctor = commands.add_parser(
        "doctor", help="check OpenSearch, the rights, stored pipelines, the LLM, the models and the templates"
    )
    doctor.add_argument("--config", type=Path, help="YAML settings file (default: $ANSWERBOX_CONFIG)")
    doctor.add_argument("--verbose", action="store_true", help="also show the clients' logs and tracebacks")
    doctor.set_defaults(run=_doctor)

    demo = commands.add_parser(
        "demo", help="start the embedded default (osmem-server, sample corpus, local LLM) and ask one question"
    )
    demo.add_argument("--port", type=int, default=9400)
    demo.add_argument("--query", default="What is the name of the stadium where Super Bowl 50 was played?")
    demo.add_argument("--once", action="store_true", help="exit after showing the answer")
    demo.add_argument("--no-llm", action="store_true", help="do not start the local LLM (extractive answers only)")
    demo.add_argument("--llm-port", type=int, default=8081)
    demo.set_defaults(run=_demo)

    llm = commands.add_parser("local-llm", help="serve SmolLM2-135M-Instruct with llama.cpp's OpenAI-compatible server")
    llm.add_argument("--port", type=int, default=8081)
    llm.add_argument("--threads", type=int, default=2)
    llm.set_defaults(run=_local_llm)

    threshold = commands.add_parser(
        "threshold",
        help="choose cited_answer.min_confidence and calibration for your index from questions you labelled",
    )
    threshold.add_argument("questions", type=Path, help='JSON lines: {"question": "...", "answers": ["..."]}')
    threshold.add_argument("--index", required=True)
    threshold.add_argument("--pipeline", required=True, help="the search pipeline to measure (as stored)")
    threshold.add_argument("--url", default="http://127.0.0.1:9400", help="a running answerbox")
    threshold.add_argument("--field", default="text", help="the field the question is matched on")
    threshold.add_argument("--user", help="NAME:PASSWORD, sent as basic auth (the caller's own rights)")
    threshold.add_argument("--precision", type=float, default=0.85)
    threshold.add_argument("--z", type=float, default=1.645, help="the Wilson bound's z (0: the point estimate)")
    threshold.add_argument("--min-answers", type=int, default=20, help="answers a threshold must keep")
    threshold.set_defaults(run=_threshold)

    from answerbox.models.commands import add_models_subcommand

    add_models_subcommand(commands)

    args = parser.parse_args(argv)
    interrupt_on_sigterm()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Both clients log every request at INFO: far too costly on the search path.
    for noisy in ("httpx", "opensearch"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        return int(args.run(args))
    except KeyboardInterrupt:  # SIGINT or SIGTERM: the children were stopped on the way out
        return 128 + signal.SIGINT
    except PortInUseError as error:
        print(f"answerbox {args.command}: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
