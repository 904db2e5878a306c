"""The metric spec at the command line (issue 24, item 5), run like the console script in a forked child
(:func:`tests.test_hostile_files.run_cli`): ``--judge-lm`` means one thing in ``run``, ``compare``, ``optimize`` and
``evaluate``; ``auto`` is one line and exit 2; a hosted judge is called on its own server at temperature 0;
``optimize`` records the metric spec and the LM, and ``evaluate`` uses both unless told otherwise (and says so in
one line); every report names the LM, its decoding and the judge."""

from __future__ import annotations

import json
import shutil

import pytest

from groundstate.cli import main
from groundstate.eval.benchmarks.offquery.loader import save_instances
from groundstate.eval.benchmarks.offquery.synthetic import generate
from groundstate.eval.metric_spec import JUDGE_MEANING, LEXICAL_LABEL, SELF_LABEL
from groundstate.lm.config import LMConfig
from groundstate.testing import scripted_lm
from tests.test_hostile_files import assert_one_clean_line, run_cli

JUDGE_REPLY = "[[ ## supported_ids ## ]]\n[1]\n\n[[ ## completed ## ]]"
RUN = ["--no-progress", "--runs-dir", "runs"]


@pytest.fixture
def lms_by_model(monkeypatch):
    """Every LM an :class:`LMConfig` builds, but a ``judge`` role, is a scripted LM named after the config's default
    model (``embedded`` stands for ``openai/under-test``) with its temperature and server: a run config records what
    the command asked for, and no model is called. A ``judge`` role is built for real (it reaches the fake server).
    The patch is inherited by :func:`run_cli`'s child."""
    built: dict[tuple, object] = {}
    real = LMConfig.lm_for

    def lm_for(self, role=None):
        if role == "judge" and "judge" in self.roles:
            return real(self, role)
        model = self.default.get("model", "embedded")
        key = ("openai/under-test" if model == "embedded" else model, self.default.get("temperature", 0.0),
               self.default.get("api_base"))
        if key not in built:
            built[key] = scripted_lm(model=key[0])
            built[key].kwargs.update({"temperature": key[1], **({"api_base": key[2]} if key[2] else {})})
        return built[key]

    monkeypatch.setattr(LMConfig, "lm_for", lm_for)
    return built


def flat(text: str) -> str:
    """``text`` without any whitespace (argparse wraps help lines, also at hyphens)."""
    return "".join(text.split())


@pytest.mark.parametrize("argv", [["run", "reground", "--data", "synthetic", *RUN],
                                  ["compare", "reground", "standard", "--data", "synthetic", *RUN],
                                  ["optimize", "reground", "--data", "synthetic", "--out", "opt"],
                                  ["evaluate", "opt", "--data", "synthetic", *RUN]])
def test_auto_is_refused_in_one_line_with_exit_2_and_nothing_written(tmp_path, argv):
    code, out, err = run_cli([*argv, "--judge-lm", "auto"], tmp_path)
    assert_one_clean_line(argv, code, out, err)
    assert "--judge-lm" in err and "'auto' is gone" in err and "'same-as-lm'" in err and "'lexical'" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == [".stderr", ".stdout"]  # nothing ran, nothing written


@pytest.mark.parametrize("command", [["run", "reground"], ["run", "standard"], ["compare"], ["optimize"],
                                     ["evaluate"]])
def test_judge_lm_means_the_same_in_every_command(command, capsys):
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = flat(capsys.readouterr().out)
    assert flat(JUDGE_MEANING) in text
    default = "thejudgetheprogramwasoptimizedwith" if command == ["evaluate"] else "default'lexical'"
    assert default in text
    assert flat("sampling temperature for --lm (default 0, the papers' decoding") in text


def test_a_hosted_judge_is_called_on_its_server_at_temperature_zero(tmp_path, servers, lms_by_model, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    server = servers(responder=lambda request: JUDGE_REPLY)
    (tmp_path / "lm.toml").write_text(f'[roles.judge]\nmodel = "openai/judge"\napi_base = "{server.url}"\n')
    argv = ["run", "reground", "--n", "1", "--lm-config", "lm.toml", "--judge-lm", "openai/judge", *RUN]
    code, out, err = run_cli(argv, tmp_path)
    assert code == 0, err[-2000:]
    bodies = [json.loads(r["body"]) for r in server.requests]
    assert bodies and all(b["temperature"] == 0.0 and b["model"] == "judge" for b in bodies)
    (run_dir,) = (tmp_path / "runs").iterdir()
    config = json.loads((run_dir / "config.json").read_text())
    assert config["options"]["judge"] == "lm:openai/judge"
    assert config["options"]["metric_spec"] == {"judge": "openai/judge", "judge_lm": {
        "model": "openai/judge", "temperature": 0.0, "max_tokens": None, "api_base": server.url}}
    printed = " ".join(out.split())
    assert "openai/judge (LM judge, temperature 0)" in printed and "openai/under-test" in printed


def test_same_as_lm_says_the_model_judges_itself_in_the_paper_tables(tmp_path, lms_by_model):
    argv = ["compare", "reground", "standard", "--n", "1", "--judge-lm", "same-as-lm", "--paper-tables",
            "--report-dir", "report", *RUN]
    code, out, err = run_cli(argv, tmp_path)
    assert code == 0, err[-2000:]
    table1 = (tmp_path / "report" / "paper-tables" / "table1.md").read_text()
    # the table's header names the judge of its cells' runs (the experiment layer's header, one line for the table)
    assert "- judge: lm:openai/under-test (judge = model under test)" in table1
    assert "- decoding: openai/under-test: temperature 0.0, max tokens 512" in table1
    assert "| openai/under-test | Standard |" in table1 and "| openai/under-test | ReGround |" in table1
    assert "| not run |" not in table1  # both programs' cells are compare's own runs
    compare = (tmp_path / "report" / "compare.md").read_text()
    assert f"- judge = {SELF_LABEL} (openai/under-test)" in compare


def _data(tmp_path):
    save_instances(tmp_path / "train.jsonl", generate("healthcare", "main", 4, seed=0))
    save_instances(tmp_path / "test.jsonl", generate("disaster", "main", 2, seed=5))


def test_evaluate_uses_the_manifests_judge_and_lm_and_says_when_told_otherwise(tmp_path, lms_by_model):
    _data(tmp_path)
    code, out, err = run_cli(["optimize", "reground", "--stage", "resolve", "--data", "train.jsonl", "--out", "opt",
                              "--max-demos", "1", "--lm", "openai/tuned", "--judge-lm", "same-as-lm"], tmp_path)
    assert code == 0, err[-2000:]
    manifest = json.loads((tmp_path / "opt" / "manifest.json").read_text())
    assert manifest["metric_spec"] == {"judge": "same-as-lm"}
    assert manifest["lms"]["default"] == {"model": "openai/tuned", "temperature": 0.0, "max_tokens": 512}
    assert f"judge = {SELF_LABEL} (openai/tuned)" in out and "decoding = temperature 0, max tokens 512" in out

    evaluate = ["evaluate", "opt", "--data", "test.jsonl", *RUN]
    code, out, err = run_cli([*evaluate, "--report-dir", "same"], tmp_path)
    assert code == 0 and "note" not in err, err[-2000:]  # the manifest's LM and judge: nothing to say
    report = json.loads((tmp_path / "same" / "evaluate.json").read_text())["config"]
    assert (report["lm"], report["judge_spec"], report["notes"]) == ("openai/tuned", "same-as-lm", [])
    assert report["judge"] == f"{SELF_LABEL} (openai/tuned)" and report["decoding"] == "temperature 0, max tokens 512"
    markdown = (tmp_path / "same" / "evaluate.md").read_text()
    for line in ("- LM = openai/tuned", "- decoding = temperature 0, max tokens 512",
                 f"- judge = {SELF_LABEL} (openai/tuned)"):
        assert line in markdown
    for run_dir in (tmp_path / "runs").iterdir():  # the LM was rebuilt from the manifest, the judge is its own
        config = json.loads((run_dir / "config.json").read_text())
        assert config["lm"]["model"] == "openai/tuned" and config["options"]["metric_spec"]["judge"] == "same-as-lm"

    code, out, err = run_cli([*evaluate, "--report-dir", "other", "--lm", "openai/other", "--judge-lm", "lexical"],
                             tmp_path)
    assert code == 0, err[-2000:]
    (note,) = [line for line in err.splitlines() if "note" in line]
    assert "LM openai/other (temperature 0, max tokens 512) instead of the manifest's openai/tuned" in note
    assert "T2 judge 'lexical' instead of the manifest's 'same-as-lm'" in note
    markdown = (tmp_path / "other" / "evaluate.md").read_text()
    assert "- LM = openai/other" in markdown and f"- judge = {LEXICAL_LABEL}" in markdown
    assert note.removeprefix("note: ") in markdown

    code, out, err = run_cli([*evaluate, "--report-dir", "warm", "--temperature", "0.7"], tmp_path)
    assert code == 0, err[-2000:]
    (note,) = [line for line in err.splitlines() if "note" in line]  # the manifest's LM at another temperature
    assert "LM openai/tuned (temperature 0.7, max tokens 512) instead of the manifest's openai/tuned (temperature 0" \
        in note and "judge" not in note


def test_a_manifest_written_before_the_metric_spec_still_evaluates(tmp_path, lms_by_model):
    _data(tmp_path)
    assert main(["optimize", "reground", "--stage", "resolve", "--data", str(tmp_path / "train.jsonl"), "--out",
                 str(tmp_path / "opt"), "--max-demos", "1"]) == 0
    path = tmp_path / "opt" / "manifest.json"
    manifest = json.loads(path.read_text())
    assert manifest["metric_spec"] == {"judge": "lexical"} and manifest["metric"]["judge"].startswith("lexical(")
    del manifest["metric_spec"], manifest["lms"]
    path.write_text(json.dumps(manifest))
    code, out, err = run_cli(["evaluate", "opt", "--data", "test.jsonl", "--report-dir", "r", *RUN], tmp_path)
    assert code == 0 and "note" not in err, err[-2000:]
    report = json.loads((tmp_path / "r" / "evaluate.json").read_text())["config"]
    assert report["judge_spec"] == "lexical" and report["lm"] == "openai/under-test"

    manifest["metric_spec"] = {"judge": "auto"}  # a hostile manifest: one line naming the file and the field
    path.write_text(json.dumps(manifest))
    argv = ["evaluate", "opt", "--data", "test.jsonl", *RUN]
    code, out, err = run_cli(argv, tmp_path)
    assert_one_clean_line(argv, code, out, err)
    assert "manifest.json" in err and "metric_spec" in err and "'auto' is gone" in err


def test_evaluate_follows_no_server_and_no_role_a_manifest_names_unless_told(tmp_path, lms_by_model):
    """A manifest is a file: its LM's server (where the user's API key would go) and its per-role LMs are used only
    when the caller gives them; else one line says which option to give, and nothing runs."""
    _data(tmp_path)
    assert main(["optimize", "reground", "--stage", "resolve", "--data", str(tmp_path / "train.jsonl"), "--out",
                 str(tmp_path / "opt"), "--max-demos", "1", "--lm", "openai/tuned", "--api-base",
                 "http://127.0.0.1:9/v1"]) == 0
    path = tmp_path / "opt" / "manifest.json"
    manifest = json.loads(path.read_text())
    assert manifest["lms"]["default"]["api_base"] == "http://127.0.0.1:9/v1"
    argv = ["evaluate", "opt", "--data", "test.jsonl", *RUN]
    code, out, err = run_cli(argv, tmp_path)
    assert_one_clean_line(argv, code, out, err)
    assert "openai/tuned at http://127.0.0.1:9/v1" in err and "--api-base" in err and not (tmp_path / "runs").exists()
    code, out, err = run_cli([*argv, "--api-base", "http://127.0.0.1:9/v1", "--report-dir", "r"], tmp_path)
    assert code == 0 and "note" not in err, err[-2000:]  # the caller named the server: the manifest's LM, there
    code, out, err = run_cli([*argv, "--api-base", "http://127.0.0.1:8/v1", "--report-dir", "r8"], tmp_path)
    assert code == 0, err[-2000:]
    (note,) = [line for line in err.splitlines() if "note" in line]
    assert "openai/tuned at http://127.0.0.1:8/v1 (temperature 0" in note and "instead of the manifest's " \
        "openai/tuned at http://127.0.0.1:9/v1" in note

    manifest["lms"]["roles"] = {"agent.0": {"model": "openai/helper", "model_path": "/etc/passwd"}}
    path.write_text(json.dumps(manifest))
    shutil.rmtree(tmp_path / "runs")
    code, out, err = run_cli([*argv, "--api-base", "http://127.0.0.1:9/v1"], tmp_path)
    assert_one_clean_line(argv, code, out, err)
    assert "per-role LMs (agent.0 = openai/helper)" in err and "--lm-config" in err
    assert not (tmp_path / "runs").exists()
