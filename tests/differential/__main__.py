"""python -m tests.differential [--examples N] [--steps N] [--replay SCRIPT]

Starts Apache Kafka and minibroker with the same settings and runs the stateful differential
test (tests/differential/machine.py) for N examples, or replays a script that hypothesis
printed for a failing example (the ``state = DifferentialEOS()`` ... ``state.teardown()`` lines).
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.differential")
    ap.add_argument("--examples", type=int, default=50, help="hypothesis examples to run (default 50)")
    ap.add_argument("--steps", type=int, default=25, help="most rules per example (default 25)")
    ap.add_argument("--replay", metavar="SCRIPT", help="run a printed failing example instead")
    ns = ap.parse_args(argv)
    if ns.examples < 1 or ns.steps < 1:
        ap.error("--examples and --steps must be at least 1")

    from hypothesis.stateful import run_state_machine_as_test

    from .machine import DifferentialEOS
    from .run import brokers, hypothesis_settings

    t0 = time.monotonic()
    with brokers() as (_pair, kafka, mb):
        print(f"Kafka on {kafka.port} (ready in {kafka.start_seconds:.1f} s), minibroker on {mb.port}",
              file=sys.stderr)
        if ns.replay:
            with open(ns.replay) as f:
                code = f.read()
            exec(compile(code, ns.replay, "exec"), {"DifferentialEOS": DifferentialEOS})
            print(f"replay passed: Kafka and minibroker agreed ({time.monotonic() - t0:.1f} s)", file=sys.stderr)
            return 0
        run_state_machine_as_test(DifferentialEOS, settings=hypothesis_settings(ns.examples, ns.steps))
    print(f"{ns.examples} examples: Kafka and minibroker agreed ({time.monotonic() - t0:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
