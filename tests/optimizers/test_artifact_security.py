"""Loading a saved artifact never imports or calls anything a manifest names unless it is registered."""

import json
import shutil
import sys
from pathlib import Path

import pytest

from groundstate.errors import ConfigError, GroundstateError, InputError
from groundstate.optimizers.artifacts import load, load_params, load_program, save_program
from groundstate.programs.reground.reground import ReGround
from groundstate.registry import ALIASES, class_path, register


@pytest.fixture
def saved(tmp_path):
    directory = tmp_path / "art"
    save_program(ReGround(max_candidates=2), directory)
    return directory


def rewrite(directory, **changes):
    path = directory / "manifest.json"
    manifest = json.loads(path.read_text())
    for key, value in changes.items():
        manifest[key] = value
    path.write_text(json.dumps(manifest))
    return manifest


def hostile_programs(sentinel):
    command = f"touch {sentinel}"
    return [
        {"class": "groundstate.lm:os.system", "kwargs": {"command": command}},
        {"class": "os:system", "kwargs": {"command": command}},
        {"class": "subprocess:call", "kwargs": {"args": ["touch", str(sentinel)]}},
        {"class": "builtins:eval", "kwargs": {"source": f"open({str(sentinel)!r}, 'w')"}},
        # a real groundstate class that is not a program (and not registered as one)
        {"class": "groundstate.eval.runner:Runner", "kwargs": {"program": None, "config": {}}},
        # a registered class of another kind
        {"class": "groundstate.optimizers.conformal:RoundwiseConformal", "kwargs": {}},
        {"class": 42, "kwargs": {}},
    ]


@pytest.mark.parametrize("index", range(7))
def test_hostile_manifest_is_refused_and_nothing_runs(saved, tmp_path, index):
    sentinel = tmp_path / "SENTINEL"
    program = hostile_programs(sentinel)[index]
    rewrite(saved, program=program)
    modules_before = set(sys.modules)
    with pytest.raises(ConfigError, match="refusing to load|is a params|must be named") as info:
        load_program(saved)
    assert "\n" not in str(info.value)
    assert not sentinel.exists()
    if isinstance(program["class"], str) and program["class"].partition(":")[0] not in modules_before:
        assert program["class"].partition(":")[0] not in sys.modules  # not even imported


def test_hostile_calibrator_manifest_is_refused(tmp_path):
    sentinel = tmp_path / "SENTINEL"
    directory = tmp_path / "cal"
    directory.mkdir()
    from groundstate.optimizers.artifacts import FORMAT, versions

    (directory / "manifest.json").write_text(json.dumps({
        "format": FORMAT, "kind": "params", "versions": versions(),
        "object": {"class": "os:system"}}))
    (directory / "params.json").write_text(json.dumps({"command": f"touch {sentinel}"}))
    with pytest.raises(ConfigError, match="refusing to load class 'os:system'"):
        load_params(directory)
    with pytest.raises(ConfigError, match="refusing to load"):
        load(directory)
    assert not sentinel.exists()


@pytest.mark.parametrize("kwargs, message", [
    ({"max_candidates": 2, "command": "touch x"}, "takes no argument 'command'"),
    ({"max_candidates": "many"}, "argument 'max_candidates'"),
    ({"multi_misleading": {"nested": 1}}, "argument 'multi_misleading'"),
    (["max_candidates"], "must be a JSON object"),
])
def test_wrong_kwargs_are_refused(saved, kwargs, message):
    rewrite(saved, program={"class": "groundstate.programs.reground.reground:ReGround", "kwargs": kwargs})
    with pytest.raises(ConfigError, match=message):
        load_program(saved)


def test_a_registered_user_class_loads_and_an_unregistered_one_does_not(tmp_path):
    import dspy

    from groundstate.programs.common import saveable

    class Unregistered(dspy.Module):
        def __init__(self, n: int = 1):
            super().__init__()
            self.init_kwargs = {"n": n}
            self.p = dspy.Predict("a -> b")

    with pytest.raises(ConfigError, match="not registered"):
        save_program(Unregistered(), tmp_path / "u")

    @saveable
    class Mine(dspy.Module):
        def __init__(self, n: int = 1):
            super().__init__()
            self.n = n
            self.p = dspy.Predict("a -> b")

    save_program(Mine(n=3), tmp_path / "mine")
    loaded = load_program(tmp_path / "mine")
    assert isinstance(loaded, Mine) and loaded.n == 3
    register(Mine)  # registering twice is harmless
    assert load(tmp_path / "mine").n == 3


@pytest.mark.parametrize("damage", [
    "no-program-json", "truncated-program-json", "manifest-list", "no-program-key", "manifest-not-utf8",
    "string-versions", "program-json-list", "state-does-not-fit",
])
def test_corrupt_program_directories_are_one_line_errors(saved, damage):
    manifest_path, state_path = saved / "manifest.json", saved / "program.json"
    if damage == "no-program-json":
        state_path.unlink()
    elif damage == "truncated-program-json":
        state_path.write_text(state_path.read_text()[:40])
    elif damage == "manifest-list":
        manifest_path.write_text("[1, 2]")
    elif damage == "no-program-key":
        manifest = json.loads(manifest_path.read_text())
        del manifest["program"]
        manifest_path.write_text(json.dumps(manifest))
    elif damage == "manifest-not-utf8":
        manifest_path.write_bytes(b"\xff\xfe{\x00")
    elif damage == "string-versions":
        rewrite(saved, versions="1.0")
    elif damage == "program-json-list":
        state_path.write_text("[]")
    elif damage == "state-does-not-fit":
        state = json.loads(state_path.read_text())
        state["verify.nonexistent.predict"] = state.pop(next(iter(state)))
        state_path.write_text(json.dumps(state))
    with pytest.raises(GroundstateError) as info:
        load_program(saved)
    assert "\n" not in str(info.value)
    assert isinstance(info.value, InputError | ConfigError)


def test_every_builtin_class_path_is_real_and_every_saveable_class_is_listed():
    import importlib
    import pkgutil

    import groundstate
    from groundstate.registry import ALIASES, BUILTIN

    for path in [*BUILTIN, *ALIASES.values()]:
        module, _, name = path.partition(":")
        assert getattr(importlib.import_module(module), name).__qualname__ == name, path
        assert path in BUILTIN, path
    saveable = set()
    for info in pkgutil.walk_packages(groundstate.__path__, "groundstate."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == info.name and "init_kwargs" in vars(value):
                saveable.add(f"{info.name}:{value.__qualname__}")
    assert saveable and saveable <= set(BUILTIN), sorted(saveable - set(BUILTIN))


#: Programs saved by earlier commits of main (named after the commit), whose classes lived at other paths then.
EARLIER = Path(__file__).resolve().parents[1] / "data" / "earlier_artifacts"


@pytest.mark.parametrize("name, today", [
    ("reground-verify-06583fa", "groundstate.programs.reground.reground:Verify"),
    ("collaboration-voting-06583fa", "groundstate.programs.reground.baselines:Voting"),
    ("baselines-manager-6b0216c", "groundstate.programs.reground.centralized:Manager"),
    ("deliberation-dhd-06583fa", "groundstate.programs.dhd.deliberation:DiverseHypothesisDeliberation"),
])
def test_a_program_saved_by_earlier_main_under_another_path_still_loads(name, today, tmp_path):
    """Each directory was written by ``save_program`` at the commit its name ends with (the class's path then is in
    its manifest, mapped by registry.ALIASES): it loads into today's class with every saved predictor's state."""
    directory = shutil.copytree(EARLIER / name, tmp_path / name)
    saved_path = json.loads((directory / "manifest.json").read_text())["program"]["class"]
    assert saved_path != today and ALIASES[saved_path] == today
    program = load_program(directory)
    assert class_path(program) == today
    state = json.loads((directory / "program.json").read_text())
    assert {n for n, _ in program.named_predictors()} == set(state) - {"metadata"}
    for predictor_name, predictor in program.named_predictors():
        assert predictor.signature.instructions == state[predictor_name]["signature"]["instructions"]


def test_a_program_whose_class_changed_since_it_was_saved_is_refused_in_one_line(tmp_path):
    """The LLM controller saved at 06583fa (path ``consilience_control``) carries ``transcript_messages``, which
    today's controller does not take, so no alias could load it: its old path is not listed, and loading it is the
    registry's one-line refusal."""
    directory = shutil.copytree(EARLIER / "consilience-control-llmcontroller-06583fa", tmp_path / "old")
    saved_path = json.loads((directory / "manifest.json").read_text())["program"]["class"]
    assert saved_path == "groundstate.programs.consilience_control:LLMController" and saved_path not in ALIASES
    with pytest.raises(ConfigError) as info:
        load_program(directory)
    assert "\n" not in str(info.value) and "refusing to load class" in str(info.value)
