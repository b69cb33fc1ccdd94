"""python -m tests.differential [--examples N] [--steps N] [--replay SCRIPT | --cases] [--checkout DIR]

Starts Apache Kafka and minibroker with the same settings and runs the stateful differential
test (tests/differential/machine.py) for N examples, or replays a script that hypothesis
printed for a failing example (the ``state = DifferentialEOS()`` ... ``state.teardown()`` lines),
or the explicit cases of tests/differential/cases.py. ``--checkout DIR`` runs the minibroker of
another checkout (e.g. a ``git worktree`` of an older commit) against the same Kafka.
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
    ap.add_argument("--cases", action="store_true", help="run the explicit cases (cases.py) instead")
    ap.add_argument("--case", action="append", default=[], help="with --cases: only this one (repeatable)")
    ap.add_argument("--checkout", metavar="DIR", help="test the minibroker of another checkout")
    ns = ap.parse_args(argv)
    if ns.examples < 1 or ns.steps < 1:
        ap.error("--examples and --steps must be at least 1")

    from hypothesis.stateful import run_state_machine_as_test

    from .machine import DifferentialEOS
    from .run import brokers, hypothesis_settings

    t0 = time.monotonic()
    with brokers(checkout=ns.checkout) as (_pair, kafka, mb):
        print(f"Kafka on {kafka.port} (ready in {kafka.start_seconds:.1f} s), minibroker on {mb.port}",
              file=sys.stderr)
        if ns.replay:
            with open(ns.replay) as f:
                code = f.read()
            exec(compile(code, ns.replay, "exec"), {"DifferentialEOS": DifferentialEOS})
            print(f"replay passed: Kafka and minibroker agreed ({time.monotonic() - t0:.1f} s)", file=sys.stderr)
            return 0
        if ns.cases:
            from .cases import CASES, run_case

            failed = []
            for name in ns.case or sorted(CASES):
                try:
                    run_case(name)
                    print(f"case {name}: agreed", file=sys.stderr)
                except AssertionError as e:
                    failed.append(name)
                    print(f"case {name}: DIVERGED\n{e}\n", file=sys.stderr)
            print(f"{len(ns.case or CASES) - len(failed)} passed, {len(failed)} failed", file=sys.stderr)
            return 1 if failed else 0
        run_state_machine_as_test(DifferentialEOS, settings=hypothesis_settings(ns.examples, ns.steps))
        from tests.reference.kafka import proc_status_kib

        print(f"peak RSS: Kafka {kafka.rss_kib('VmHWM') // 1024} MiB, "
              f"minibroker {(proc_status_kib(mb.pid, 'VmHWM') or 0) // 1024} MiB", file=sys.stderr)
    print(f"{ns.examples} examples: Kafka and minibroker agreed ({time.monotonic() - t0:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
