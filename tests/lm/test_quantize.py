"""The embedded model's tensor type: the allow-list, the cache of requantized files (made once, hostile entries
refused), the fallback to the shipped file, the type in the engine's state and description, and, with the real
model, that greedy decoding of a type is deterministic."""

import logging
import os
import sys
import types

import pytest

from groundstate.cli.options import Parser, add_lm_options, lm_config_from_args
from groundstate.errors import LMSetupError
from groundstate.eval.settings import LMSettings
from groundstate.lm.config import LMConfig
from groundstate.lm.embedded import EmbeddedEngine
from groundstate.lm.quantize import DEFAULT_QUANT, QUANT_TYPES, cache_dir, cached_name, model_for, source_digest
from groundstate.lm.specs import describe_lm, get_lm
from tests.conftest import requires_embedded

LOG = "groundstate.lm.quantize"


@pytest.fixture
def fake_llama(monkeypatch, tmp_path):
    """A stand-in ``llama_cpp`` whose quantizer copies the source (a tiny file that starts like a GGUF file) and
    counts its calls; ``state["code"]`` is what it returns. The cache lives under ``tmp_path``."""
    state = {"calls": 0, "code": 0}

    def llama_model_quantize(inp, out, params):
        state["calls"] += 1
        state["ftype"], state["allow_requantize"] = params.ftype, params.allow_requantize
        if state["code"] == 0:
            with open(out, "wb") as handle:
                handle.write(open(inp, "rb").read())
        return state["code"]

    module = types.SimpleNamespace(__version__="9.9.9", LLAMA_FTYPE_MOSTLY_Q8_0=7, LLAMA_FTYPE_MOSTLY_Q4_0=2,
                                   LLAMA_FTYPE_MOSTLY_F16=1, llama_model_quantize=llama_model_quantize,
                                   llama_model_quantize_default_params=lambda: types.SimpleNamespace(
                                       ftype=0, allow_requantize=False, nthread=0))
    monkeypatch.setitem(sys.modules, "llama_cpp", module)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    source = tmp_path / "model.gguf"
    source.write_bytes(b"GGUF" + os.urandom(4096))
    state["source"] = source
    state["target"] = cache_dir() / cached_name(source_digest(source), "q8_0", "9.9.9")
    return state


def test_the_types_are_an_allow_list_everywhere(tmp_path):
    assert DEFAULT_QUANT == "q8_0" and set(QUANT_TYPES) == {"shipped", "q8_0", "q4_0", "f16"}
    assert set(LMSettings.model_fields["lm_quant"].annotation.__args__[0].__args__) == set(QUANT_TYPES)
    with pytest.raises(LMSetupError, match="unknown embedded model type 'q5_k'; use one of shipped, q8_0"):
        EmbeddedEngine(quant="q5_k")
    with pytest.raises(LMSetupError, match="field 'quant' must be one of shipped, q8_0, q4_0, f16"):
        get_lm("embedded", quant="../../evil")
    with pytest.raises(LMSetupError, match="apply only to the embedded LM"):
        get_lm("openai/gpt-4o-mini", quant="q8_0")
    path = tmp_path / "lm.toml"
    path.write_text('[default]\nmodel = "embedded"\nquant = "q2_k"\n')
    with pytest.raises(LMSetupError, match=r"section \[default\]: field 'quant' must be one of"):
        LMConfig.load(path)
    parser = Parser(prog="t")
    add_lm_options(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--lm-quant", "q2_k"])
    with pytest.raises(LMSetupError, match="--lm-quant apply only to the embedded LM"):
        lm_config_from_args(parser.parse_args(["--lm", "openai/m", "--lm-quant", "f16"]))


def test_the_cache_is_keyed_by_the_sources_hash_the_type_and_the_llama_cpp_version(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "groundstate" / "models"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # not absolute: ignored, as the XDG spec says
    assert cache_dir() == type(tmp_path).home() / ".cache" / "groundstate" / "models"
    source = tmp_path / "m.gguf"
    source.write_bytes(b"GGUF one")
    first = source_digest(source)
    source.write_bytes(b"GGUF two, longer")  # another size: hashed again, not taken from the process's memo
    second = source_digest(source)
    assert first != second and len(second) == 64
    names = {cached_name(d, q, v) for d in (first, second) for q in ("q8_0", "f16") for v in ("0.3.36", "0.4.0")}
    assert len(names) == 8 and cached_name(first, "q8_0", "0.3.36") == f"{first[:24]}.q8_0.llama-cpp-python-0.3.36.gguf"


def test_a_copy_is_made_once_with_llama_cpps_quantizer_and_reused(fake_llama):
    made = model_for(fake_llama["source"], "q8_0")
    assert made == (fake_llama["target"], "q8_0") and made.path.read_bytes() == fake_llama["source"].read_bytes()
    assert (fake_llama["calls"], fake_llama["ftype"], fake_llama["allow_requantize"]) == (1, 7, True)
    assert model_for(fake_llama["source"], "q8_0") == made and fake_llama["calls"] == 1  # reused, not remade
    assert model_for(fake_llama["source"], "shipped") == (fake_llama["source"], "shipped")
    assert [p.name for p in made.path.parent.iterdir() if p.name.startswith(".partial-")] == []  # no leftovers


@pytest.mark.parametrize("entry", ["symlink", "empty directory", "truncated file", "not a gguf file"])
def test_a_hostile_cache_entry_is_never_used_and_is_replaced(fake_llama, tmp_path, entry):
    target = fake_llama["target"]
    target.parent.mkdir(parents=True)
    planted = tmp_path / "planted.gguf"
    planted.write_bytes(fake_llama["source"].read_bytes())  # a plausible model file somewhere else
    if entry == "symlink":
        target.symlink_to(planted)
    elif entry == "empty directory":
        target.mkdir()
    elif entry == "truncated file":
        target.write_bytes(b"GGUF")
    else:
        target.write_bytes(b"ELF!" + bytes(4096))
    made = model_for(fake_llama["source"], "q8_0")
    assert made == (target, "q8_0") and fake_llama["calls"] == 1
    assert not target.is_symlink() and target.is_file() and target.read_bytes().startswith(b"GGUF")
    assert planted.read_bytes() == fake_llama["source"].read_bytes()  # a symlink's target is never touched


def test_a_directory_with_content_in_the_cache_falls_back_to_the_shipped_file(fake_llama, caplog):
    (fake_llama["target"] / "inside").mkdir(parents=True)
    with caplog.at_level(logging.WARNING, logger=LOG):
        assert model_for(fake_llama["source"], "q8_0") == (fake_llama["source"], "shipped")
    assert (fake_llama["target"] / "inside").is_dir() and "uses the shipped file" in caplog.text


@pytest.mark.parametrize("failure", ["quantizer error", "unwritable cache"])
def test_any_failure_runs_and_describes_the_shipped_file_with_one_warning(fake_llama, monkeypatch, caplog, failure):
    if failure == "quantizer error":
        fake_llama["code"] = 1
    else:
        (fake_llama["source"].parent / "not-a-dir").write_text("")
        monkeypatch.setenv("XDG_CACHE_HOME", str(fake_llama["source"].parent / "not-a-dir"))
    with caplog.at_level(logging.WARNING, logger=LOG):
        engine = EmbeddedEngine(model_path=str(fake_llama["source"]), quant="f16", contexts=1)
        assert engine.resolved_path() == str(fake_llama["source"]) and engine.effective_quant == "shipped"
        again = EmbeddedEngine(model_path=str(fake_llama["source"]), quant="f16", contexts=1)
        assert again.resolved_path() == str(fake_llama["source"])
    warnings = [r for r in caplog.records if r.name == LOG and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "this run uses the shipped file" in warnings[0].getMessage()
    assert "quant" not in engine.describe()  # what ran: the shipped file, described as such
    assert engine.dump_state()["quant"] == "f16"  # what was asked for: a saved program tries it again elsewhere
    assert [p for p in fake_llama["source"].parent.rglob(".partial-*")] == []


def test_the_type_is_in_the_state_and_the_description_and_old_states_run_the_shipped_file(fake_llama):
    source = str(fake_llama["source"])
    engine = EmbeddedEngine(model_path=source, contexts=1)
    assert engine.quant == "q8_0" and engine.dump_state()["quant"] == "q8_0"
    assert engine.describe()["quant"] == "q8_0" and engine.resolved_path() == str(fake_llama["target"])
    assert EmbeddedEngine.load_state(engine.dump_state()).quant == "q8_0"
    old = {"model_path": source, "n_ctx": 8192, "n_threads": 1, "max_string_length": 300, "max_items": 8, "seed": 0}
    loaded = EmbeddedEngine.load_state(old)  # saved by a release without types: it ran the shipped file
    assert loaded.quant == "shipped" and loaded.resolved_path() == source and loaded.dump_state() == old
    assert {k: v for k, v in loaded.describe().items() if k != "runtime"} == {**old, "revision": 2}
    f16 = EmbeddedEngine(model_path=source, quant="f16", contexts=1)
    assert f16.pool() is not engine.pool()  # one pool per file that runs
    lm = get_lm("embedded", model_path=source, quant="f16")
    assert describe_lm(lm)["engine"]["quant"] == "f16"


def test_lm_quant_on_the_command_line_and_in_lm_configs(fake_llama, tmp_path):
    parser = Parser(prog="t")
    add_lm_options(parser)
    assert lm_config_from_args(parser.parse_args([])).lm_for(None).engine.quant == "q8_0"
    config = lm_config_from_args(parser.parse_args(["--lm-quant", "shipped"]))
    assert config.lm_for(None).engine.quant == "shipped" and "quant" not in config.describe()["default"]
    path = tmp_path / "lm.toml"
    path.write_text('[default]\nmodel = "embedded"\nquant = "f16"\n\n[roles."agent.1"]\nmodel = "embedded"\n')
    config = lm_config_from_args(parser.parse_args(["--lm-config", str(path), "--lm-quant", "q4_0"]))
    assert config.lm_for(None).engine.quant == "f16"  # the file's own setting wins
    assert config.lm_for("agent.1").engine.quant == "q4_0"
    assert config.describe()["roles"]["agent.1"]["quant"] == "q4_0"


@pytest.mark.embedded
@requires_embedded
def test_real_model_copy_is_made_once_and_greedy_decoding_of_a_type_is_deterministic(tmp_path, monkeypatch):
    import llama_cpp

    from groundstate.lm.contexts import new_llama
    from groundstate.lm.embedded import find_embedded_model

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = []
    real = llama_cpp.llama_model_quantize
    monkeypatch.setattr(llama_cpp, "llama_model_quantize", lambda *a: calls.append(a) or real(*a))
    source = find_embedded_model()
    made = model_for(source, "q8_0")
    assert made.quant == "q8_0" and made.path.parent == tmp_path / "groundstate" / "models" and len(calls) == 1
    assert model_for(source, "q8_0") == made and len(calls) == 1  # the second use loads the same file
    messages = [{"role": "user", "content": "Name three colours of the rainbow, one word each."}]
    outputs, file_types = [], []
    for path in (made.path, made.path):
        llama = new_llama(str(path), 512, 1)  # a fresh context each time
        out = llama.create_chat_completion(messages=messages, temperature=0.0, max_tokens=24, seed=0)
        outputs.append(out["choices"][0]["message"]["content"])
        file_types.append(llama.metadata.get("general.file_type"))
        llama.close()
    assert outputs[0] == outputs[1] and outputs[0].strip()  # same type, same threads: the same greedy output
    assert file_types == [str(llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0)] * 2  # the file holds the type it is named for
