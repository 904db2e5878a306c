"""Speed of the LM-free travel task generator (moved out of the tests: a timed assertion belongs here), and how
much its public plans give away.

Generates ``--n`` tasks (default 1,000) with :func:`groundstate.eval.benchmarks.travel.generator.generate_travel`
and, as the baseline measured in the same run, validates the same tasks once with
:func:`~groundstate.eval.benchmarks.travel.validator.validate_travel` (every accepted task is validated at least
once while it is generated, so generation can never be cheaper than that). Reports tasks per second and the
ratio generation time / validation time; the target is at least 200 tasks/s on one core (about 500 were
measured on an idle machine).

Then measures the public-only leak of the same tasks with
:func:`~groundstate.eval.benchmarks.travel.leak.leak_rates`: every rule that reads only the plans (cheapest,
cheapest step-free, most central, ...), its hit rate, the worst one against chance, and the p-value of that
excess against random answers on the same plans. The run fails if the excess is more than luck gives
(``p < 0.01``). Writes ``bench/results/travel_generator.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from groundstate.eval.benchmarks.travel.generator import generate_travel  # noqa: E402
from groundstate.eval.benchmarks.travel.leak import leak_rates  # noqa: E402
from groundstate.eval.benchmarks.travel.validator import validate_travel  # noqa: E402

OUT = Path(__file__).parent / "results" / "travel_generator.json"
TARGET_TASKS_PER_S = 200.0
MIN_LEAK_P = 0.01


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="200 tasks")
    args = parser.parse_args()
    n = 200 if args.quick else args.n
    started = time.perf_counter()
    tasks = generate_travel(n, seed=11)
    generation = time.perf_counter() - started
    started = time.perf_counter()
    problems = sum(len(validate_travel(task)) for task in tasks)
    validation = time.perf_counter() - started
    leak = leak_rates(tasks)
    p_value = leak.p_value if leak.p_value is not None else 1.0
    result = {"n": n, "generation_s": round(generation, 3), "validation_s": round(validation, 3),
              "tasks_per_s": round(n / generation, 1), "generation_over_validation": round(generation / validation, 2),
              "invalid_tasks": problems, "target_tasks_per_s": TARGET_TASKS_PER_S,
              "leak": {"worst_rule": leak.worst, "worst_rate": round(leak.worst_rate, 4),
                       "chance": round(leak.chance, 4), "excess_points": round(100 * leak.excess, 2),
                       "p_value": round(p_value, 4), "luck_points_95": round(100 * (leak.luck or 0.0), 2),
                       "min_p_value": MIN_LEAK_P,
                       "rates": {name: round(rate, 4) for name, rate in
                                 sorted(leak.rates.items(), key=lambda item: -item[1])}},
              "meets_target": n / generation >= TARGET_TASKS_PER_S and problems == 0 and p_value >= MIN_LEAK_P}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if result["meets_target"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
