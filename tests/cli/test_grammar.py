"""One CLI grammar (issue 17, item 4): help text everywhere, a light ``--help``, ``-v`` anywhere, shared options."""

import argparse
import json
import subprocess
import sys

import pytest

from groundstate.cli import build_parser, main


def leaf_parsers(parser, prefix=()):
    """``(path, parser)`` for the top-level parser, every command group and every command."""
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from leaf_parsers(sub, prefix + (name,))


def option(parser, flag):
    return next((a for a in parser._actions if flag in a.option_strings), None)


def command(path):
    return dict(leaf_parsers(build_parser()))[tuple(path)]


def test_every_option_and_positional_has_help_text():
    missing = []
    for path, parser in leaf_parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if not action.help:  # argparse.SUPPRESS (a hidden alias) is a help text
                missing.append(f"groundstate {' '.join(path)} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, "options without help text:\n" + "\n".join(missing)


HEAVY = ("sklearn", "scipy")


@pytest.mark.parametrize("argv", [[], ["--help"], ["dhd", "--help"], ["consilience", "--help"],
                                  ["hidden", "--help"], ["run", "qa", "--help"], ["consilience", "train", "--help"]])
def test_help_imports_no_scikit_learn_or_scipy(argv):
    code = ("import sys\nfrom groundstate.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})\n"
            "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    line = [x for x in done.stderr.splitlines() if x.startswith("HEAVY=")]
    assert line == ["HEAVY="], done.stderr[-2000:]


def test_verbose_after_the_subcommand():
    parser = build_parser()
    assert parser.parse_args(["runs", "list"]).verbose == 0
    assert parser.parse_args(["-v", "runs", "list"]).verbose == 1
    assert parser.parse_args(["runs", "list", "-v"]).verbose == 1
    assert parser.parse_args(["run", "qa", "--data", "x.jsonl", "-vv"]).verbose == 2
    assert parser.parse_args(["-v", "dhd", "analyze", "--cache", "c", "--verbose"]).verbose == 2
    assert option(command(["consilience", "train"]), "-v").help


def test_verbose_after_the_subcommand_sets_the_log_level(tmp_path, monkeypatch):
    import logging

    levels = []
    monkeypatch.setattr(logging, "basicConfig", lambda **kw: levels.append(kw["level"]))
    monkeypatch.chdir(tmp_path)
    assert main(["runs", "list", "--out", str(tmp_path), "-vv"]) == 0
    assert levels == [logging.DEBUG]


@pytest.mark.parametrize("cmd", ["generate", "replay", "mask"])
def test_dhd_lm_commands_take_the_shared_lm_options(cmd):
    parser = command(["dhd", cmd])
    for flag in ("--lm", "--api-base", "--lm-config", "--temperature", "--max-tokens", "--lm-timeout"):
        assert option(parser, flag) is not None, (cmd, flag)
    args = build_parser().parse_args(["dhd", cmd, "--cache", "c", "--api-base", "http://localhost:8000/v1",
                                      "--lm-config", "lms.toml", *(["--problems", "p.json"] if cmd == "generate"
                                                                   else ["--mode", "loo"] if cmd == "replay"
                                                                   else [])])
    assert args.api_base == "http://localhost:8000/v1" and args.lm_config == "lms.toml"


def test_dhd_lm_config_reaches_the_lm(tmp_path):
    from groundstate.cli.options import lm_config_from_args

    config = tmp_path / "lms.toml"
    config.write_text('[default]\nmodel = "openai/served"\napi_base = "http://localhost:9/v1"\n')
    args = build_parser().parse_args(["dhd", "replay", "--cache", "c", "--mode", "loo", "--lm-config", str(config)])
    described = json.dumps(lm_config_from_args(args).describe())
    assert "openai/served" in described and "localhost:9" in described
