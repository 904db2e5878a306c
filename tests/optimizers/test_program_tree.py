"""Composed pipelines: custom modules, swapped stages and DSPy's own state files save and load."""

import importlib
import json

import dspy
import pytest

import groundstate as gs
from groundstate.errors import ConfigError
from groundstate.optimizers.artifacts import load, read_manifest, save_program
from groundstate.testing import scripted_lm


class Pick(dspy.Signature):
    """Pick the option the information supports."""

    information: str = dspy.InputField(desc="what is known")
    answer: str = dspy.OutputField(desc="the option letter")


@gs.saveable
class MyResolve(dspy.Module):
    """A user's replacement for ReGround's resolve stage (same call contract)."""

    def __init__(self, style: str = "plain"):
        super().__init__()
        self.style = style
        self.pick = dspy.Predict(Pick)

    def forward(self, state, question, options):
        out = self.pick(information=f"{state}\n{question}\n{options}")
        return dspy.Prediction(answer=out.answer, reason=self.style)


@gs.saveable
class Pipeline(dspy.Module):
    def __init__(self, candidates: int = 2):
        super().__init__()
        self.verify = gs.Verify(max_candidates=candidates)
        self.decide = MyResolve(style="pipeline")

    def forward(self, agents, question, options):
        verified = self.verify(agents)
        return self.decide(state=str(verified.trusted), question=question, options=options)


def test_custom_module_round_trip(tmp_path):
    program = Pipeline(candidates=1)
    program.decide.pick.demos = [dspy.Example(information="i", answer="B")]
    program.verify.extract.signature = program.verify.extract.signature.with_instructions("TUNED")
    save_program(program, tmp_path / "art")
    manifest = read_manifest(tmp_path / "art")
    assert manifest["modules"]["decide"] == {"class": f"{__name__}:MyResolve", "kwargs": {"style": "pipeline"}}
    loaded = load(tmp_path / "art")
    assert isinstance(loaded, Pipeline) and loaded.verify.max_candidates == 1
    assert loaded.decide.pick.demos[0]["answer"] == "B"
    assert loaded.verify.extract.signature.instructions == "TUNED"


def test_swapped_stage_round_trip(tmp_path):
    rg = gs.ReGround(max_candidates=2)
    rg.resolve = MyResolve(style="swapped")
    rg.resolve.pick.demos = [dspy.Example(information="i", answer="C")]
    rg.resolve.pick.signature = rg.resolve.pick.signature.with_instructions("MY INSTRUCTION")
    save_program(rg, tmp_path / "art")
    loaded = load(tmp_path / "art")
    assert isinstance(loaded.resolve, MyResolve) and loaded.resolve.style == "swapped"
    assert loaded.resolve.pick.demos[0]["answer"] == "C"
    assert loaded.resolve.pick.signature.instructions == "MY INSTRUCTION"
    episode = gs.generate_offquery("healthcare", "main", 1, seed=3)[0]
    lm = scripted_lm(lambda req: {"answer": "C"} if "MY INSTRUCTION" in req.system else None)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        assert loaded(**episode.inputs("unreliable")).answer == "C"


def test_unregistered_stage_and_class_are_refused_before_anything_runs(tmp_path, monkeypatch):
    built = []

    class Rogue(dspy.Module):  # not registered
        def __init__(self):
            super().__init__()
            built.append(1)
            self.p = dspy.Predict("a -> b")

    rg = gs.ReGround()
    rg.resolve = Rogue()
    with pytest.raises(ConfigError, match=r"stage 'resolve' is a Rogue, which is not registered") as exc:
        save_program(rg, tmp_path / "x")
    assert "\n" not in str(exc.value) and not (tmp_path / "x").exists()

    # a hand-edited manifest naming an unregistered class for a stage: refused, nothing imported or built
    save_program(gs.ReGround(), tmp_path / "art")
    path = tmp_path / "art" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["modules"]["resolve"] = {"class": "os:system", "kwargs": {}}
    path.write_text(json.dumps(manifest))
    imported = []
    real_import = importlib.import_module

    def spy(name, *args, **kwargs):
        imported.append(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", spy)
    with pytest.raises(ConfigError, match=r"module 'resolve'.*refusing to load class 'os:system'") as exc:
        load(tmp_path / "art")
    monkeypatch.undo()
    assert "\n" not in str(exc.value) and "os" not in imported and built == [1]
    manifest["modules"]["resolve"] = {"class": f"{__name__}:Rogue"}
    path.write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="refusing to load class"):
        load(tmp_path / "art")
    assert built == [1]
    manifest["modules"] = {"forward": {"class": f"{__name__}:MyResolve"}}
    path.write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="not a module"):
        load(tmp_path / "art")


def test_dspy_own_save_format_is_read(tmp_path):
    rg = gs.ReGround()
    rg.resolve.choose.demos = [dspy.Example(information="i", question="q", options="A: a", answer="A", reason="r")]
    rg.verify.detect.signature = rg.verify.detect.signature.with_instructions("DSPY SAVED")
    rg.resolve.choose.lm = dspy.LM("openai/gpt-4o-mini", api_base="http://attacker.invalid")
    rg.save(str(tmp_path / "program.json"))
    with pytest.raises(ConfigError, match="does not name its program class; pass the program"):
        load(tmp_path / "program.json")
    loaded = gs.load(tmp_path / "program.json", program=gs.ReGround())
    assert loaded.resolve.choose.demos[0]["answer"] == "A"
    assert loaded.verify.detect.signature.instructions == "DSPY SAVED"
    assert loaded.resolve.choose.lm is None  # LMs come from the configuration, never from a file
    with pytest.raises(ConfigError, match="does not fit QuestionAnswering"):
        gs.load(tmp_path / "program.json", program=gs.QuestionAnswering())
    rg.resolve.choose.lm = None
    rg.save(str(tmp_path / "whole"), save_program=True)
    with pytest.raises(ConfigError, match="pickle"):
        gs.load(tmp_path / "whole", program=gs.ReGround())
    # a groundstate artifact's state can be loaded into a program the caller built, too
    save_program(rg, tmp_path / "art")
    into = gs.load(tmp_path / "art", program=gs.ReGround())
    assert into.verify.detect.signature.instructions == "DSPY SAVED"
