"""The vectorised state, the shared-work beliefs of simulated agents and the routing cache give the numbers of
the per-agent code they replace (issue 18 item 3)."""

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
from groundstate.programs.consilience import simulated, simulated_belief, simulated_group
from groundstate.programs.consilience.consilience import Consilience
from groundstate.programs.consilience.control import ControlContext, RuleController, route
from groundstate.programs.consilience.simulated import SimAgent, SimTeam, group_beliefs, sim_preset, trusted_belief
from groundstate.programs.consilience.simulated_group import GroupBeliefs
from groundstate.programs.consilience.simulated_streams import mix, mix_rows, normal_rows, normals
from groundstate.programs.consilience.state import (
    branch_states,
    collective_state,
    divergences,
    js_divergences,
    state_and_divergences,
)
from groundstate.records import Belief, Transcript

TASKS = generate_hidden_travel(4, seed=5)


def random_beliefs(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """Random distributions with exact zeros (whole options, and one-hot rows)."""
    matrix = rng.dirichlet(np.full(k, 0.7), size=n)
    matrix[rng.random((n, k)) < 0.25] = 0.0
    matrix[rng.random(n) < 0.2] = np.eye(k)[rng.integers(0, k)]
    matrix[matrix.sum(axis=1) == 0, 0] = 1.0
    return matrix / matrix.sum(axis=1, keepdims=True)


def scipy_divergences(matrix: np.ndarray) -> np.ndarray:
    """The definition (the code before vectorisation): agent by agent, scipy's distance in base 2, squared."""
    mean = matrix.mean(axis=0)
    return np.array([float(jensenshannon(row, mean, base=2) ** 2) for row in matrix])


@pytest.mark.parametrize("seed", range(40))
def test_js_divergences_match_scipy_with_zeros(seed):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 20)), int(rng.integers(2, 7))
    matrix = random_beliefs(rng, n, k)
    new, old = js_divergences(matrix), scipy_divergences(matrix)
    assert np.max(np.abs(new - old)) <= 1e-12
    assert np.all(new >= -1e-15) and np.all(new <= 1 + 1e-12)
    batch = np.stack([matrix, random_beliefs(rng, n, k)])
    stacked = js_divergences(batch)
    assert np.max(np.abs(stacked[0] - old)) <= 1e-12
    assert np.max(np.abs(stacked[1] - scipy_divergences(batch[1]))) <= 1e-12


def test_identical_and_disjoint_beliefs():
    same = np.tile([0.25, 0.25, 0.5, 0.0], (3, 1))
    assert np.allclose(js_divergences(same), 0.0, atol=1e-15)
    disjoint = np.array([[1.0, 0.0], [0.0, 1.0]])
    # from the mean (1/2, 1/2) the midpoint is (3/4, 1/4): JSD = (KL(p||m) + KL(mean||m)) / 2, in bits
    hand = (np.log2(4 / 3) + 0.5 * np.log2(2 / 3) + 0.5 * np.log2(2)) / 2
    assert np.allclose(js_divergences(disjoint), hand) and np.allclose(scipy_divergences(disjoint), hand)


def beliefs_of(matrix, options):
    return [Belief.from_scores(options, row.tolist()) for row in matrix]


def test_branch_states_match_one_state_at_a_time():
    task = TASKS[0]
    options = task.options
    rng = np.random.default_rng(1)
    team = SimTeam(sim_preset("ideal"), seed=0)(task)
    transcripts = [Transcript(), Transcript().with_message(team[1].speak(task, Transcript(), "Route", 0))]
    groups = [beliefs_of(random_beliefs(rng, task.n_agents, len(options)), options) for _ in transcripts]
    batched = branch_states(task, groups, transcripts, 1, 10)
    for (state, spread), beliefs, transcript in zip(batched, groups, transcripts, strict=True):
        assert state == collective_state(task, beliefs, transcript, 1, 10)
        assert state == state_and_divergences(task, beliefs, transcript, 1, 10)[0]
        assert np.max(np.abs(spread - scipy_divergences(np.array([[b.probs[o] for o in options] for b in beliefs])))
                      ) <= 1e-12
        assert np.array_equal(spread, divergences(beliefs, options))


@pytest.mark.parametrize("preset", ["ideal", "limited"])
@pytest.mark.parametrize("n_agents", [4, 16])
def test_group_beliefs_equal_agent_beliefs(preset, n_agents, monkeypatch):
    task = TASKS[1].model_copy(update={"private": [TASKS[1].private[i % TASKS[1].n_agents] for i in range(n_agents)]})
    agents = SimTeam(sim_preset(preset), seed=2)(task)
    transcript = Transcript()
    for step in range(7):
        monkeypatch.setattr(simulated, "_GROUPS", {})
        monkeypatch.setattr(simulated_belief, "_NOISE", {})
        for final in (False, True):
            together = group_beliefs(agents, task, transcript, step, final=final)
            alone = [a.vote(task, transcript) if final else a.belief(task, transcript, step) for a in agents]
            assert [b.model_dump() for b in together] == [b.model_dump() for b in alone]
            again = group_beliefs(agents, task, transcript, step, final=final)  # from the cache
            assert [b.model_dump() for b in again] == [b.model_dump() for b in together]
        transcript = transcript.with_message(agents[step % n_agents].speak(task, transcript, "Route", step))


def test_vectorised_and_loop_paths_agree(monkeypatch):
    task = TASKS[2]
    agents = SimTeam(sim_preset("ideal"), seed=4)(task)
    transcript = Transcript()
    for step in range(5):
        transcript = transcript.with_message(agents[step % len(agents)].speak(task, transcript, "Challenge", step))
    results = []
    for threshold in (1, 10_000):
        monkeypatch.setattr(simulated, "_GROUPS", {})
        monkeypatch.setattr(simulated, "_VECTOR_MIN", threshold)
        results.append([b.model_dump() for b in group_beliefs(agents, task, transcript, 5)])
    assert results[0] == results[1]


def test_trusted_belief_is_model_construct():
    probs = {"A": 0.25, "B": 0.75}
    fast, slow = trusted_belief(probs, "B", 0.75), Belief.model_construct(probs=probs, vote="B", confidence=0.75)
    assert fast == slow and fast.model_fields_set == slow.model_fields_set
    assert fast.__pydantic_extra__ == slow.__pydantic_extra__ and fast.__pydantic_private__ == slow.__pydantic_private__
    assert fast.model_dump() == slow.model_dump() and type(fast) is Belief


def test_routing_cache_belongs_to_its_context():
    task = TASKS[3]
    options = task.options
    first = [Belief.from_scores(options, [1.0, 0.0, 0.0][: len(options)] + [0.0] * (len(options) - 3))
             for _ in range(task.n_agents)]
    first[0] = Belief.from_scores(options, [0.0, 1.0] + [0.0] * (len(options) - 2))
    second = list(first)
    second[0], second[-1] = second[-1], second[0]
    ctx = ControlContext(task, Transcript(), first, [0] * task.n_agents, ["Challenge"])
    assert route("Challenge", ctx) == 0
    fresh = ControlContext(task, Transcript(), second, [0] * task.n_agents, ["Challenge"])
    assert route("Challenge", fresh) == task.n_agents - 1  # a new state is never routed on the old one's cache
    given = ControlContext(task, Transcript(), second, [0] * task.n_agents, ["Challenge"],
                           spread=divergences(second, options))
    assert route("Challenge", given) == task.n_agents - 1


def test_subclassed_agents_take_their_own_path():
    class Loud(SimAgent):
        def belief(self, task, transcript, round):
            return Belief.from_scores(task.options, [1.0] + [0.0] * (len(task.options) - 1))

    task = TASKS[0]
    out = Consilience(lambda t: [Loud(i) for i in range(t.n_agents)], RuleController(), max_rounds=3)(task=task)
    assert all(entry["state"]["D"] == 0 for entry in out.trace)


@pytest.mark.parametrize("seed", range(20))
def test_noise_rows_are_each_streams_normals(seed):
    """The array hashing and Box-Muller give every stream's own draws, bit for bit (negative and 64-bit parts,
    parts common to all rows or not, an odd count)."""
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 25)), int(rng.integers(1, 8))
    seeds = [int(x) for x in rng.integers(-2**63, 2**63, n)] if seed % 2 else [int(rng.integers(-3, 3))] * n
    index = [int(x) for x in rng.integers(0, 2**40, n)] if seed % 3 else [5] * n
    parts = [int(x) for x in rng.integers(-2**62, 2**62, 4)]
    rows = normal_rows(mix_rows(seeds, parts[0], index, *parts[1:]), k)
    alone = np.array([normals(mix(s, parts[0], i, *parts[1:]), k) for s, i in zip(seeds, index, strict=True)])
    assert rows.shape == alone.shape and rows.tobytes() == alone.tobytes()


def test_group_beliefs_from_a_fresh_plan_equal_the_incremental_ones(monkeypatch):
    """Summed scores extended branch by branch give the beliefs computed from scratch."""
    task = TASKS[1].model_copy(update={"private": [TASKS[1].private[i % TASKS[1].n_agents] for i in range(16)]})
    agents = SimTeam(sim_preset("ideal"), seed=1)(task)
    transcript = Transcript()
    for step in range(6):
        group_beliefs(agents, task, transcript, step)
        transcript = transcript.with_message(agents[step].speak(task, transcript, "SeekEvidence", step))
    walked = group_beliefs(agents, task, transcript, 6)
    monkeypatch.setattr(simulated, "_GROUPS", {})
    monkeypatch.setattr(simulated_group, "_PLANS", {})
    fresh = group_beliefs(agents, task, transcript, 6)
    assert [b.model_dump() for b in walked] == [b.model_dump() for b in fresh]


def test_a_group_carries_its_matrix_only_while_unchanged(monkeypatch):
    task = TASKS[0]
    agents = SimTeam(sim_preset("ideal"), seed=0)(task)
    monkeypatch.setattr(simulated, "_VECTOR_MIN", 1)
    beliefs = group_beliefs(agents, task, Transcript(), 0)
    assert isinstance(beliefs, GroupBeliefs)
    options = task.options
    expected = np.array([[b.probs[o] for o in options] for b in beliefs])
    assert np.array_equal(beliefs.matrix_for(options), expected)
    assert beliefs.matrix_for(list(reversed(options))) is None
    changed = beliefs.copy()
    changed[0] = beliefs[-1]
    assert changed.matrix_for(options) is None and beliefs.matrix_for(options) is not None
    carried = branch_states(task, [beliefs, changed], [Transcript(), Transcript()], 0, 10)
    plain = branch_states(task, [list(beliefs), list(changed)], [Transcript(), Transcript()], 0, 10)
    assert [s for s, _ in carried] == [s for s, _ in plain]
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(carried, plain, strict=True))
