"""``groundstate dhd simulate``: a replay cache drawn from a generative model of the real DHD design.

Parses the options of :class:`~groundstate.eval.dhd.simulate.DesignSpec`, writes the cache with
:func:`~groundstate.eval.dhd.simulate.write_cache` (through the durable runner, like ``dhd replay``) and prints
where it is; ``groundstate dhd analyze --cache DIR`` then runs on it unchanged. Calibration and power studies
(``bench/dhd_calibration.py``) use the same model in memory.
"""

from __future__ import annotations

import argparse
from typing import Any

from groundstate.cli.numbers import positive, positive_int, seed, share
from groundstate.errors import ConfigError


def register(dhd_sub: Any) -> None:
    """Add ``simulate`` to the ``dhd`` command group."""
    p = dhd_sub.add_parser("simulate", help="write a replay cache simulated from the real design (calibration, power)",
                           description="Simulate LOO replays: problems with their own full-pool accuracy "
                           "(Beta-distributed), per block two full-pool calls and one removal call per message, "
                           "all iid Bernoulli(problem accuracy) under the null, plus planted effects that shift "
                           "chosen messages' removal accuracy. The defaults are realistic: a U-shaped mix of easy, "
                           "hard and a few borderline problems (mean accuracy 0.71, identical-input disagreement "
                           "about 7%%, inside the paper's 1.6-17.5%%) and proposals right more often on easy "
                           "problems. Writes a cache in the normal format (analyze runs on it unchanged) and "
                           "simulation.json with the ground truth, against which `dhd analyze` scores its "
                           "selections (recall and false discoveries). A planted effect needs room to act: a helpful "
                           "one on a problem the integrator never solves (or a harmful one on a problem it always "
                           "solves) is clipped to nothing and counts as no effect.")
    p.add_argument("--cache", required=True, metavar="DIR", help="the new cache directory (must not exist or be empty)")
    p.add_argument("--n", type=positive_int, default=200, metavar="N", help="problems (default 200)")
    p.add_argument("--blocks", type=positive_int, default=5, metavar="B", help="replay blocks per problem (default 5)")
    p.add_argument("--k", type=positive_int, default=5, help="messages per problem (default 5)")
    p.add_argument("--seed", type=seed, default=0, help="seed (default 0)")
    p.add_argument("--effects", nargs="+", default=[], metavar="GROUP:SHARE:SIZE",
                   help="planted effects, e.g. W+:0.05:0.6 (5%% of wrong-proposal messages are helpful: their "
                        "removal lowers accuracy by 0.6) C-:0.05:0.6 (default: none, the null)")
    p.add_argument("--accuracy", type=positive, nargs=2, default=(0.15, 0.06), metavar=("ALPHA", "BETA"),
                   help="Beta shape of the problems' full-pool accuracy (default 0.15 0.06: mean 0.71, about 7%% "
                        "identical-input disagreement; 2 1 was the default before issue 25, 34%%)")
    p.add_argument("--accuracy-range", type=share, nargs=2, default=(0.0, 1.0), metavar=("LO", "HI"),
                   help="the Beta draw is scaled into [LO, HI] (default 0 1)")
    p.add_argument("--hard-share", type=share, default=0.0,
                   help="share of problems drawn from the hard accuracy distribution instead (default 0)")
    p.add_argument("--hard-accuracy", type=positive, nargs=2, default=(1.0, 3.0), metavar=("ALPHA", "BETA"),
                   help="Beta shape of the hard problems' accuracy (default 1 3)")
    p.add_argument("--proposal-range", type=share, nargs=2, default=(0.05, 0.85), metavar=("LO", "HI"),
                   help="a message's proposal is correct with probability LO + (HI - LO) x its problem's accuracy "
                        "(default 0.05 0.85)")
    p.add_argument("--proposal-correct", type=share, default=None, metavar="P",
                   help="instead, one probability for every message whatever its problem (0.6 was the default "
                        "before issue 25)")
    p.add_argument("--fail-rate", type=share, default=0.0,
                   help="probability that a call fails operationally (default 0)")
    p.add_argument("--benchmarks", nargs="+", default=["sim"], metavar="NAME",
                   help="benchmark labels assigned to problems in turn (default: one, 'sim')")
    p.set_defaults(func=cmd_simulate)


def cmd_simulate(args: argparse.Namespace) -> int:
    from groundstate.eval.dhd.simulate import (  # noqa: PLC0415 (--help stays light)
        DesignSpec,
        PlantedEffect,
        simulate,
        write_cache,
    )

    try:
        spec = DesignSpec(n_problems=args.n, n_blocks=args.blocks, k=args.k, accuracy=tuple(args.accuracy),
                          accuracy_range=tuple(args.accuracy_range), hard_share=args.hard_share,
                          hard_accuracy=tuple(args.hard_accuracy), proposal_correct=args.proposal_correct,
                          proposal_range=tuple(args.proposal_range),
                          effects=tuple(PlantedEffect.parse(e) for e in args.effects), fail_rate=args.fail_rate,
                          benchmarks=tuple(args.benchmarks))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    written = write_cache(simulate(spec, args.seed), args.cache)
    print(f"simulated {written['n_problems']} problems x {written['k']} messages x {written['n_blocks']} blocks "
          f"({written['n_planted']} planted effects) into {written['cache']}; ground truth {written['truth']}")
    print(f"next: groundstate dhd analyze --cache {written['cache']}")
    return 0
