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
            if not action.help:  # argparse.SUPPRESS (a hidden option) is a help text
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
    assert main(["runs", "list", "--runs-dir", str(tmp_path), "-vv"]) == 0
    assert levels == [logging.DEBUG]


@pytest.mark.parametrize("cmd", ["generate", "replay", "mask"])
def test_dhd_lm_commands_take_the_shared_lm_options(cmd):
    parser = command(["dhd", cmd])
    for flag in ("--lm", "--api-base", "--lm-config", "--temperature", "--max-tokens", "--lm-timeout", "--lm-threads",
                 "--lm-contexts"):
        assert option(parser, flag) is not None, (cmd, flag)
    args = build_parser().parse_args(["dhd", cmd, "--cache", "c", "--api-base", "http://localhost:8000/v1",
                                      "--lm-config", "lms.toml", *(["--data", "p.json"] if cmd == "generate"
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


# -- one spelling per meaning (the shared options of groundstate.cli.options) -----------------------------------
OLD_SPELLINGS = ("--tasks", "--problems", "--from-mediq", "--out-dir", "--workers", "--data-seed", "--runs")


def visible_flags(parser):
    return {flag for a in parser._actions if a.help != argparse.SUPPRESS for flag in a.option_strings}


def test_no_command_shows_an_earlier_spelling():
    shown = {(" ".join(path), flag) for path, parser in leaf_parsers(build_parser())
             for flag in visible_flags(parser) if flag in OLD_SPELLINGS}
    assert not shown


def test_shared_options_have_one_default_everywhere():
    from groundstate.cli.options import CALL_THREADS, THREADS

    defaults = {}
    for path, parser in leaf_parsers(build_parser()):
        for flag, expected in (("--threads", THREADS), ("--call-threads", CALL_THREADS), ("--agents", "sim"),
                               ("--seed", 0)):
            action = option(parser, flag)
            if action is not None:
                defaults.setdefault(flag, set()).add(action.default)
                assert action.default == expected, (" ".join(path), flag, action.default)
    assert set(defaults) == {"--threads", "--call-threads", "--agents", "--seed"}


def test_a_runs_directory_is_always_runs_dir_and_never_out():
    for path, parser in leaf_parsers(build_parser()):
        runs_dir, out = option(parser, "--runs-dir"), option(parser, "--out")
        if runs_dir is not None:
            assert runs_dir.dest == "runs_dir", path
        if out is not None:
            assert out.dest == "out" and "run directories" not in out.help, path


@pytest.mark.parametrize("argv, old", [
    (["hidden", "run", "--data", "t.jsonl", "--tasks", "t.jsonl"], "--tasks"),
    (["data", "build", "offquery", "--data", "m.jsonl", "--from-mediq", "m.jsonl", "--out", "o.jsonl"],
     "--from-mediq"),
    (["data", "validate", "--data", "d.jsonl", "e.jsonl"], "e.jsonl"),
    (["split", "--data", "d.jsonl", "--out-dir", "s"], "--out-dir"),
    (["hidden", "annotate", "--data", "t.jsonl", "--workers", "2"], "--workers"),
    (["run", "reground", "--data", "synthetic", "--data-seed", "3"], "--data-seed"),
    (["dhd", "simulate", "--cache", "c", "--problems", "30"], "--problems"),
    (["dhd", "replay", "--cache", "c", "--mode", "loo", "--sample-temperature", "0.3"], "--sample-temperature"),
])
def test_a_spelling_of_earlier_development_is_a_usage_error(argv, old, capsys):
    """Version 0.1.0 has one spelling per option: an earlier one (never released) is argparse's one-line usage
    error, exit 2, naming the unknown argument (the command's required options are given, so it is the only
    error), and nothing is respelled behind the user's back."""
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "unrecognized arguments" in err and old in err, err
    assert "is now" not in err


def test_a_missing_input_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["data", "stats"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "required: --data" in err, err


def documented_commands():
    """Every ``groundstate ...`` command of the code blocks of README.md, the documentation pages (docs/**/*.md)
    and the Makefile (continuation lines joined)."""
    import re
    import shlex
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    blocks = [block for page in pages
              for block in re.findall(r"```(?:bash|sh)\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)]
    blocks.append((root / "Makefile").read_text(encoding="utf-8").replace("$(BIN)/", ""))
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if line.startswith("groundstate "):
                commands.append(shlex.split(line)[1:])
    return commands


def test_every_documented_and_demo_command_parses_in_todays_spelling(capsys):
    commands = documented_commands()
    assert len(commands) > 60
    for argv in commands:
        argv = [a if a != "..." else "x" for a in argv]
        try:
            build_parser().parse_args(argv)
        except SystemExit as exc:
            raise AssertionError(f"groundstate {' '.join(argv)}: {capsys.readouterr().err}") from exc
        capsys.readouterr()


def visible_commands(parser, prefix=()):
    """The path of every command ``--help`` lists (hidden aliases left out), groups and their commands alike."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            listed = {choice.dest for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if name in listed:
                    yield prefix + (name,)
                    yield from visible_commands(sub, prefix + (name,))


def test_the_command_line_page_names_every_command():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    paths = list(visible_commands(build_parser()))
    assert ("dhd", "analyze") in paths and ("data", "build", "offquery") in paths  # the walk finds nested commands
    groups = {path[:-1] for path in paths}
    missing = [" ".join(path) for path in paths if path not in groups and f"`{' '.join(path)}`" not in page]
    assert not missing, f"commands missing from docs/cli.md: {missing}"


# -- every number is range-checked when it is parsed (issue 22, item 5) -----------------------------------------
#: Number options whose type is not range-checked, with the reason they need not be.
UNCHECKED_NUMBERS = {"--travelers": "choices=(3, 4) is the range"}


def unchecked_numbers(parser, path=()):
    """Options of ``parser`` and its commands that take a number without a range-checked type: a plain ``int`` or
    ``float`` type, or a number default whose type has no ``bounds`` (see groundstate.cli.numbers.bounded)."""
    found = []
    for sub_path, sub in leaf_parsers(parser, path):
        for action in sub._actions:
            if not action.option_strings or action.nargs == 0:
                continue
            flag = action.option_strings[-1]
            plain = action.type in (int, float)
            number_default = isinstance(action.default, int | float) and not isinstance(action.default, bool)
            ranged = getattr(action.type, "bounds", None) is not None
            if (plain or (number_default and not ranged)) and flag not in UNCHECKED_NUMBERS:
                found.append(f"groundstate {' '.join(sub_path)} {flag}")
    return found


def test_every_number_option_is_range_checked_when_parsed():
    loose = unchecked_numbers(build_parser())
    assert not loose, "number options without a range:\n" + "\n".join(loose)
    for flag in UNCHECKED_NUMBERS:  # each exception still names an option that exists and is bounded another way
        actions = [option(p, flag) for _, p in leaf_parsers(build_parser()) if option(p, flag) is not None]
        assert actions and all(a.choices for a in actions), flag


def test_the_range_check_finds_a_plain_number_option():
    """The walk above can fail: a plain int option and a float default without a ranged type are both found."""
    from groundstate.cli.numbers import share
    from groundstate.cli.options import Parser

    parser = Parser(prog="groundstate")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    p = sub.add_parser("demo")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--rate", type=lambda text: float(text), default=0.5)
    p.add_argument("--share", type=share, default=0.5)
    assert unchecked_numbers(parser) == ["groundstate demo --count", "groundstate demo --rate"]


OUT_OF_RANGE = [
    (["consilience", "calibrate", "--data", "tasks.jsonl", "--out", "cal", "--alpha", "1.5"], "--alpha"),
    (["consilience", "ablate", "actions", "--data", "t.jsonl", "--calibration-data", "c.jsonl", "--alpha", "0"],
     "--alpha"),
    (["dhd", "analyze", "--cache", "c", "--q", "0"], "--q"),
    (["dhd", "analyze", "--cache", "c", "--permutations", "0"], "--permutations"),
    (["dhd", "simulate", "--cache", "c", "--fail-rate", "1.5"], "--fail-rate"),
    (["split", "--data", "d.jsonl", "--train-share", "-0.1"], "--train-share"),
    (["run", "reground", "--data", "synthetic", "--n", "0", "--runs-dir", "runs"], "--n"),
    (["run", "qa", "--data", "d.jsonl", "--max-error-rate", "2", "--runs-dir", "runs"], "--max-error-rate"),
    (["run", "qa", "--data", "d.jsonl", "--temperature", "nan", "--runs-dir", "runs"], "--temperature"),
    (["hidden", "run", "--data", "t.jsonl", "--sim-recall", "1.5", "--runs-dir", "runs"], "--sim-recall"),
    (["optimize", "reground", "--data", "d.jsonl", "--out", "o", "--max-failed-share", "1.1"], "--max-failed-share"),
    (["evaluate", "o", "--data", "d.jsonl", "--seed", "-1"], "--seed"),
    (["consilience", "train", "--data", "x.jsonl", "--out", "m", "--hidden", "32", "0"], "--hidden"),
]


@pytest.mark.parametrize("argv, flag", OUT_OF_RANGE, ids=[" ".join(a[:2]) + " " + f for a, f in OUT_OF_RANGE])
def test_an_out_of_range_number_is_one_line_before_any_work(argv, flag, tmp_path):
    """Exit 2 with one line naming the option, before any file is read (none of them exists) or written."""
    from tests.test_hostile_files import run_cli

    code, out, err = run_cli(argv, tmp_path)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, err)
    assert f"argument {flag}" in lines[0] and "expected" in lines[0], lines[0]
    written = [p.name for p in tmp_path.iterdir() if p.name not in (".stdout", ".stderr")]
    assert not written, written


def test_in_range_numbers_parse_to_their_values():
    args = build_parser().parse_args(["consilience", "calibrate", "--data", "t.jsonl", "--out", "cal",
                                      "--alpha", "0.05", "--max-rounds", "3", "--seed", "7"])
    assert (args.alpha, args.max_rounds, args.seed) == (0.05, 3, 7)
    args = build_parser().parse_args(["run", "reground", "--n", "2", "--max-candidates", "1", "--limit", "0"])
    assert (args.n, args.max_candidates, args.limit) == (2, 1, 0)


# -- the grammar's gaps (issue 26, item 6); behaviour in tests/cli/test_grammar_gaps.py ----------------------------
#: Commands that show progress without a --backend option (every command with --backend shows it).
SHOWS_PROGRESS = {("optimize",), ("hidden", "annotate"), ("consilience", "train")}


def leaf_commands():
    """``(path, parser)`` of every command (no command groups)."""
    for path, parser in leaf_parsers(build_parser()):
        if not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
            yield path, parser


def test_every_command_that_shows_progress_takes_no_progress():
    """``--no-progress`` wherever progress is shown (every command with --backend, optimize, hidden annotate and
    consilience train, so a script can pass it to every consilience step), one flag with one dest; with the shared
    help wherever a command has no reason to say more."""
    from groundstate.cli.options import PROGRESS_HELP

    missing, seen = [], set()
    for path, parser in leaf_commands():
        if option(parser, "--backend") is None and path not in SHOWS_PROGRESS:
            continue
        seen.add(path)
        action = option(parser, "--no-progress")
        if action is None:
            missing.append(" ".join(path))
            continue
        assert action.dest == "no_progress" and action.nargs == 0 and action.default is False, path
        assert "progress" in action.help, path
        if path not in SHOWS_PROGRESS:
            assert action.help == PROGRESS_HELP, path
    assert not missing, "commands that show progress without --no-progress:\n" + "\n".join(missing)
    assert {("consilience", step) for step in ("explore", "train", "calibrate", "coverage")} <= seen


@pytest.mark.parametrize("step", ["explore", "train", "calibrate", "coverage"])
def test_every_consilience_step_accepts_no_progress(step):
    extra = {"explore": ["--out", "x.jsonl"], "train": ["--out", "m"], "calibrate": ["--out", "cal"],
             "coverage": ["--calibrator", "cal"]}[step]
    args = build_parser().parse_args(["consilience", step, "--data", "t.jsonl", *extra, "--no-progress"])
    assert args.no_progress is True


#: The OffQuery commands: their --judge-lm is the T2 judge of the one metric spec.
OFFQUERY_JUDGED = {("run", name) for name in ("reground", "oracle", "standard", "voting", "robin", "manager",
                                              "instructor", "self-reflect", "confidence")} | {("compare",),
                                                                                              ("optimize",)}


def test_judge_lm_has_one_default_and_one_help_across_commands():
    """The OffQuery commands share MetricSpec's judge: the same default and help (optimize adds where it is recorded);
    evaluate alone defaults to the program's own judge. DHD's --judge-lm (the answer judge) agrees across DHD."""
    from groundstate.eval.metric_spec import JUDGE_HELP, JUDGE_MEANING, MetricSpec

    judged = {path: option(parser, "--judge-lm") for path, parser in leaf_commands()
              if option(parser, "--judge-lm") is not None}
    offquery = {path for path, action in judged.items() if action.help.startswith(JUDGE_MEANING)}
    assert offquery == OFFQUERY_JUDGED | {("evaluate",)}
    for path in OFFQUERY_JUDGED:
        action = judged[path]
        assert action.default == MetricSpec().judge == "lexical", path
        assert action.help.startswith(JUDGE_HELP) and action.metavar == "JUDGE", path
    assert {judged[p].help for p in OFFQUERY_JUDGED - {("optimize",)}} == {JUDGE_HELP}
    evaluate = judged[("evaluate",)]
    assert evaluate.default is None and "optimized with" in evaluate.help and evaluate.metavar == "JUDGE"
    dhd = {path: judged[path] for path in judged if path[0] == "dhd"}
    assert set(dhd) == {("dhd", "generate"), ("dhd", "replay"), ("dhd", "mask")}
    assert len({(a.default, a.help) for a in dhd.values()}) == 1


@pytest.mark.parametrize("path", [("run", "reground"), ("compare",), ("evaluate",), ("optimize",)])
def test_every_offquery_data_option_names_synthetic(path):
    """``--data synthetic`` means the same in every command that reads OffQuery data, and each says so."""
    parser = command(path)
    assert "'synthetic'" in option(parser, "--data").help, path
    for flag in ("--domain", "--variant", "--n", "--synthetic-seed"):
        assert option(parser, flag) is not None, (path, flag)
    if path == ("optimize",):
        assert "'synthetic'" in option(parser, "--val-data").help
