"""CPU cost of rendering the LLM judge's prompt (:func:`stef.llm.prompt.render_messages`) — not run in CI.

Usage::

    python tests/benchmarks/bench_prompt.py [--records 1000] [--repeat 5]

Prepares ``--records`` distinct synthetic agent log records (the records of
``bench_llm_judge.py``, all ASCII, stages A–E once each, not timed) and the same records with
non-ASCII text in the question (``NON_ASCII``: accented names, a non-breaking space, a bidi mark
that the prompt must escape), then renders every record's messages ``--repeat`` times per set
and prints the fastest pass of each in milliseconds per record (as ``timeit`` does: the slower
passes measure the machine's other load). To compare with another checkout's rendering, run
this script with that checkout's ``stef`` package in place (the script imports the checkout it
is in). The model path renders each record's
prompt in the thread that also prepares the next records while the event loop's thread sends and
reads the requests, so this CPU is taken from the requests in flight (issue 20).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests.support

from stef.llm.prompt import render_messages
from stef.models import AgentLogRecord
from stef.pipeline.evaluate import Prepared, prepare
from stef.pipeline.judge.models import JudgeInput
from tests.support.llm_server import synthetic_records

NON_ASCII = " (São Paulo, Zürich, Kraków:\u00a0Ωmega \u200f)"
"""Appended to each question of the second set."""


def judge_inputs(rows: list[dict[str, Any]]) -> list[JudgeInput]:
    """The judge input of every row that the pipeline can prepare."""
    inputs = []
    for row in rows:
        prepared = prepare(AgentLogRecord(**row))
        if isinstance(prepared, Prepared):
            inputs.append(prepared.judge_input)
    return inputs


def fastest_pass_ms(inputs: list[JudgeInput], repeat: int) -> tuple[float, float]:
    """Milliseconds per record of the fastest and the slowest of ``repeat`` rendering passes."""
    passes = []
    for _ in range(max(1, repeat)):
        started = time.perf_counter()
        for judge_input in inputs:
            render_messages(judge_input)
        passes.append(time.perf_counter() - started)
    return min(passes) * 1000 / len(inputs), max(passes) * 1000 / len(inputs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    rows = synthetic_records(args.records)
    sets = {
        "ASCII records": judge_inputs(rows),
        "non-ASCII questions": judge_inputs([{**row, "question": row["question"] + NON_ASCII} for row in rows]),
    }
    for name, inputs in sets.items():
        if not inputs:
            print(f"{name}: no record could be prepared", file=sys.stderr)
            return 1
        fastest, slowest = fastest_pass_ms(inputs, args.repeat)
        print(
            f"render_messages, {name}: {fastest:.3f} ms per record "
            f"(fastest of {max(1, args.repeat)} passes over {len(inputs)} prepared records; slowest {slowest:.3f} ms)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
