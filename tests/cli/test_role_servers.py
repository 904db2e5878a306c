"""Each LM role on its own server (issue 26, item 3): the T2 judge (``--judge-api-base``, or the ``judge`` role of
``--lm-config``) and GEPA's reflection LM (``--reflection-api-base``, or the ``reflection`` role) reach their own
server, inherit ``--api-base`` only when they have ``--lm``'s provider, and a server that cannot be reached is
named by the option that sets it."""

from __future__ import annotations

import json

import pytest

from groundstate.errors import ConfigError, LMCallError
from groundstate.eval.benchmarks.offquery.loader import save_instances
from groundstate.eval.benchmarks.offquery.synthetic import generate
from groundstate.eval.reground.judges import LMJudge
from groundstate.eval.reground.optimize import OptimizeSettings, reflection_lm
from groundstate.eval.settings import LMSettings
from groundstate.eval.task import RunContext
from groundstate.lm.config import LMConfig
from groundstate.lm.specs import get_lm
from tests.cli.test_metric_spec_cli import JUDGE_REPLY, RUN, lms_by_model  # noqa: F401 (a fixture)
from tests.test_hostile_files import run_cli

REFLECTION_REPLY = "```\nWeigh every finding.\n```"


def judge_bodies(server):
    return [json.loads(r["body"]) for r in server.requests]


@pytest.mark.usefixtures("lms_by_model")
@pytest.mark.parametrize("own", [True, False])
def test_the_judge_reaches_its_own_server_or_inherits_the_lms(tmp_path, servers, monkeypatch, own):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    lm_server = servers(responder=lambda request: JUDGE_REPLY)
    judge_server = servers(responder=lambda request: JUDGE_REPLY)
    argv = ["run", "reground", "--n", "1", "--lm", "openai/under-test", "--api-base", lm_server.url,
            "--judge-lm", "openai/judge", *RUN]
    if own:
        argv += ["--judge-api-base", judge_server.url]
    code, out, err = run_cli(argv, tmp_path)
    assert code == 0, err[-2000:]
    target, other = (judge_server, lm_server) if own else (lm_server, judge_server)
    bodies = judge_bodies(target)
    assert bodies and all(b["model"] == "judge" for b in bodies)  # the program's LM is scripted: only the judge
    assert not other.requests
    (run_dir,) = (tmp_path / "runs").iterdir()
    config = json.loads((run_dir / "config.json").read_text())
    assert config["options"]["metric_spec"]["judge_lm"]["api_base"] == target.url


def test_a_judge_of_another_provider_does_not_inherit_the_server():
    config = LMConfig.from_options(lm="hosted_vllm/qwen", api_base="http://127.0.0.1:9/v1")
    assert config.server_for("hosted_vllm/judge") == {"api_base": "http://127.0.0.1:9/v1"}
    assert config.server_for("openai/gpt-4o") == {}  # its key must not go to the vLLM server
    assert config.server_for("openai/gpt-4o", "http://127.0.0.1:8/v1") == {"api_base": "http://127.0.0.1:8/v1"}
    assert config.server_for("embedded", "http://127.0.0.1:8/v1") == {}


def test_an_unreachable_judge_server_names_judge_api_base(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    judge = LMJudge(get_lm("openai/judge", api_base="http://127.0.0.1:9/v1", num_retries=0, timeout=5))
    with pytest.raises(LMCallError) as info:
        judge.supported("The patient has a fever.", ["Fever."])
    message = str(info.value)
    assert "--judge-api-base" in message and "cannot reach the server" in message and "\n" not in message


def test_the_reflection_lm_reaches_its_own_server_or_inherits_the_lms(tmp_path, servers, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    lm_server, own_server = servers(content=REFLECTION_REPLY), servers(content=REFLECTION_REPLY)
    context = RunContext(lms=LMSettings(lm="openai/under-test", api_base=lm_server.url))
    lm_config = context.lm_config
    for given, server in ((own_server.url, own_server), (None, lm_server)):
        settings = OptimizeSettings(data="d.jsonl", optimizer="gepa", reflection_lm="openai/reflect",
                                    reflection_api_base=given)
        reflect = reflection_lm(settings, context, lm_config)
        before = len(server.requests)
        reflect("Reply with the word OK.", max_tokens=8)
        assert len(server.requests) == before + 1 and json.loads(server.requests[-1]["body"])["model"] == "reflect"
    assert reflection_lm(OptimizeSettings(data="d.jsonl", reflection_lm="anthropic/x"), context,
                         lm_config).kwargs.get("api_base") is None  # another provider: its own endpoint
    with pytest.raises(ConfigError, match="needs --reflection-lm"):
        reflection_lm(OptimizeSettings(data="d.jsonl", reflection_api_base=own_server.url), context, lm_config)


def test_the_reflection_role_of_an_lm_config_is_used(tmp_path, servers, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    server = servers(content=REFLECTION_REPLY)
    (tmp_path / "lm.toml").write_text(f'[default]\nmodel = "embedded"\n\n[roles.reflection]\n'
                                      f'model = "openai/reflect"\napi_base = "{server.url}"\n')
    context = RunContext(lms=LMSettings(lm_config=str(tmp_path / "lm.toml")))
    lm_config = LMConfig.load(tmp_path / "lm.toml")
    reflect = reflection_lm(OptimizeSettings(data="d.jsonl", optimizer="gepa"), context, lm_config)
    reflect("Reply with the word OK.", max_tokens=8)
    assert len(server.requests) == 1
    with pytest.raises(ConfigError, match="give one model"):
        reflection_lm(OptimizeSettings(data="d.jsonl", reflection_lm="openai/other"), context, lm_config)
    with pytest.raises(ConfigError, match="in one place"):
        reflection_lm(OptimizeSettings(data="d.jsonl", reflection_api_base=server.url), context, lm_config)


def test_an_unreachable_reflection_server_names_reflection_api_base(tmp_path):
    data = generate("healthcare", "main", 4)
    save_instances(tmp_path / "train.jsonl", data[:2])
    save_instances(tmp_path / "val.jsonl", data[2:])
    code, out, err = run_cli(["optimize", "oracle", "--data", "train.jsonl", "--val-data", "val.jsonl", "--out", "o",
                              "--optimizer", "gepa", "--lm", "hosted_vllm/under-test", "--api-base",
                              "http://127.0.0.1:9/v1", "--reflection-lm", "hosted_vllm/reflect",
                              "--reflection-api-base", "http://127.0.0.1:9/v1", "--lm-timeout", "5"], tmp_path)
    assert code == 2 and "--reflection-api-base" in err and len(err.strip().splitlines()) == 1, err[-2000:]
