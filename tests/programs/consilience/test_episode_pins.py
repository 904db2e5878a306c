"""Pinned Consilience episodes with simulated agents: the outputs (answer, votes, transcript, trace, final state)
and exploration rows of a few seeded episodes must stay byte-identical to what they were before the speed work of
issue 18 item 3 (hashes of their JSON, recorded on the code before the change).

Re-pinned once since, for issue 25 item 6: the action-conditional router now breaks ties by the state and a seeded
draw instead of the lowest index, which changes every episode it routes (every case but the four other routers'
``router-*``, whose pins are unchanged)."""

import hashlib
import json
import random

import pytest

from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
from groundstate.programs.consilience.consilience import Consilience, explore
from groundstate.programs.consilience.control import ROUTERS, RuleController
from groundstate.programs.consilience.simulated import SimTeam, sim_preset
from groundstate.records import HiddenProfileTask

TRAVEL = generate_hidden_travel(6, seed=11)


class Threshold:
    """A calibrator stand-in with one threshold for every round."""

    def __init__(self, value: float):
        self.value = value

    def threshold(self, round: int) -> float:
        return self.value


def hand_task(n_agents: int, seed: int) -> HiddenProfileTask:
    """A hidden profile for ``n_agents`` agents: shared facts for a decoy, private facts mostly for the answer."""
    rng = random.Random(seed)
    options = ["A", "B", "C", "D"]
    correct, decoy = rng.sample(options, 2)
    support: dict[str, dict[str, float]] = {}

    def fact(tag: str, favour: str) -> str:
        text = f"{tag}: plan {favour} suits the group on {rng.choice(['price', 'pace', 'meals', 'access'])}."
        support[text] = {favour: float(rng.choice([1, 2])), rng.choice(options): -0.5}
        return text

    shared = [fact(f"Public note {j}", decoy) for j in range(3)]
    private = [[fact(f"Traveller {i} note {j}", rng.choice([correct, correct, decoy])) for j in range(2)]
               for i in range(n_agents)]
    return HiddenProfileTask(id=f"pin-{n_agents}-{seed}", description="Choose a trip plan.", shared=shared,
                             private=private, options=options, correct=correct, support=support)


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def episodes(tasks, preset: str, **config) -> str:
    program = Consilience(SimTeam(sim_preset(preset), seed=3), RuleController(), **config)
    outs = [program(task=task) for task in tasks]
    return digest([{k: o[k] for k in ("answer", "votes", "transcript", "trace", "final_state", "rounds", "words")}
                   for o in outs])


HAND = [hand_task(n, seed) for n in (2, 5, 16) for seed in (1, 2)]

CASES = {
    "ideal-travel": lambda: episodes(TRAVEL, "ideal"),
    "limited-travel": lambda: episodes(TRAVEL, "limited"),
    "ideal-hand": lambda: episodes(HAND, "ideal"),
    "limited-hand": lambda: episodes(HAND, "limited", max_rounds=6),
    **{f"router-{router}": (lambda router=router: episodes(TRAVEL[:3] + HAND[:2], "ideal", router=router))
       for router in ROUTERS},
    "calibrated": lambda: episodes(TRAVEL + HAND, "ideal", calibrator=Threshold(0.02)),
    "every-round": lambda: episodes(TRAVEL[:3] + HAND, "limited", calibrator=Threshold(0.05),
                                    set_sampling="every-round", seed=4),
    "on-reject": lambda: episodes(TRAVEL[:3] + HAND, "ideal", calibrator=Threshold(0.01), set_sampling="on-reject"),
    "removed": lambda: episodes(TRAVEL[:3], "ideal", removed_actions=("Clarify",), min_vote_round=4),
    "explore": lambda: digest([explore(task, SimTeam(sim_preset(preset), seed=1)(task), max_rounds=6,
                                       policy=policy, seed=2)
                               for task in TRAVEL[:3] + HAND[:3] for preset in ("ideal", "limited")
                               for policy in ("random", "best")]),
}

PINNED = {
    'calibrated': '0964ffaebee09834',
    'every-round': '2480563f63d65e5b',
    'explore': '4cefeff72e8c6ed0',
    'ideal-hand': '849f040a69b034d1',
    'ideal-travel': '25727796042fd58e',
    'limited-hand': 'd7dd205a39d0f490',
    'limited-travel': '94307eb6adbd63f2',
    'on-reject': 'd74f5e86d904aab2',
    'removed': 'c2a1856cbd8c26aa',
    'router-action-conditional': 'ade3745b03c43cf1',
    'router-most-disagreeing': '5fb3530f56c923cb',
    'router-most-spoken': '0b874104d94cb1a6',
    'router-random': 'f6ca6ca2f5803269',
    'router-round-robin': 'dd3dba09c9098c17',
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_episode_outputs_are_pinned(case):
    assert CASES[case]() == PINNED[case]


if __name__ == "__main__":  # print the digests (to pin them on a known-good version of the code)
    for name in sorted(CASES):
        print(f"    {name!r}: {CASES[name]()!r},")
