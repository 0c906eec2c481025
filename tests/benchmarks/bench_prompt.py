"""CPU cost of rendering the LLM judge's prompt (:func:`stef.llm.prompt.render_messages`) — not run in CI.

Usage::

    python tests/benchmarks/bench_prompt.py [--records 1000] [--repeat 5]

Prepares ``--records`` distinct synthetic agent log records (the records of
``bench_llm_judge.py``, stages A–E once each, not timed), then renders every record's messages
``--repeat`` times and prints the fastest pass in milliseconds per record (as ``timeit`` does:
the slower passes measure the machine's other load). The model path renders each record's
prompt in the thread that also prepares the next records while the event loop's thread sends and
reads the requests, so this CPU is taken from the requests in flight (issue 20).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests.support

from stef.llm.prompt import render_messages
from stef.models import AgentLogRecord
from stef.pipeline.evaluate import Prepared, prepare
from tests.support.llm_server import synthetic_records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    inputs = []
    for row in synthetic_records(args.records):
        prepared = prepare(AgentLogRecord(**row))
        if isinstance(prepared, Prepared):
            inputs.append(prepared.judge_input)
    if not inputs:
        print("no record could be prepared", file=sys.stderr)
        return 1
    passes = []
    for _ in range(max(1, args.repeat)):
        started = time.perf_counter()
        for judge_input in inputs:
            render_messages(judge_input)
        passes.append(time.perf_counter() - started)
    print(
        f"render_messages: {min(passes) * 1000 / len(inputs):.3f} ms per record "
        f"(fastest of {len(passes)} passes over {len(inputs)} prepared records; "
        f"slowest {max(passes) * 1000 / len(inputs):.3f} ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
