"""The paper's Tables 1, 10 and 11 for ``groundstate compare --paper-tables``: experiment specs built in memory from
compare's options, tabulated by the experiment layer (:func:`groundstate.eval.experiments.table.build_table`).

Each table is a :class:`~groundstate.eval.experiments.spec.Spec` whose cells are planned exactly as ``compare`` (or
``run``) plans a program with the same options, so a cell's run is the run directory named by its planned run id;
nothing is chosen from "the runs in the directory", newest or otherwise. A stored run made with another LM,
decoding, judge, data, seed, record limit or program option is another run id: it is no cell of these tables (the
command names such runs in a note), and a run directory whose configuration differs from its cell's plan, or a
cell that two stored runs claim, refuses the table in one line (:mod:`~groundstate.eval.experiments.checks`).

- **Table 1** (main results): T1/T2/T3 of every program (rows: the LM, then the program; column: the setting),
  with the relative gain over standard collaboration, ``(score - standard) / standard`` in percent (when Standard
  is one of the programs).
- **Table 10** (candidate-pool ablation): ReGround's T1/T2/T3 at M = 1..5 (``--max-candidates``; compare's own M
  too when it is another) and the oracle condition (``--oracle-t1``: attribution skipped), every other option as
  compare's.
- **Table 11** (token cost): input, output and total tokens per instance, and the calls served from DSPy's cache
  (which bill no tokens), of every program.

The programs are the ones compare names; with none, Table 1 plans the paper's Standard and ReGround and Table 11
the paper's eight programs, and nothing runs: the tables show what is stored for those cells, and "not run" for
the rest. Cells nobody ran say "not run". The numbers are ours; ``groundstate experiment table reground-table1``
(and ``-table10``, ``-table11``) puts the paper's published numbers beside them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from groundstate.eval.experiments.load import check_spec
from groundstate.eval.experiments.spec import Spec
from groundstate.eval.reground.settings import BaselineOptions, CompareSettings, OffQueryData, ReGroundOptions

METRICS = ("t1", "t2", "t3")
#: M values of Table 10 (the paper's ablation; compare's own M is added when it is another).
CANDIDATES = (1, 2, 3, 4, 5)
#: The programs of the paper's Table 1 and Table 11 (their order), when compare names none.
TABLE1_PROGRAMS = ("standard", "reground")
TABLE11_PROGRAMS = ("standard", "voting", "robin", "manager", "instructor", "self-reflect", "confidence", "reground")
LABELS = {"reground": "ReGround", "standard": "Standard", "oracle": "Oracle", "voting": "Voting", "robin": "Robin",
          "manager": "Manager", "instructor": "Instructor", "self-reflect": "Self-Reflect",
          "confidence": "Confidence"}
TITLES = {"1": "Table 1 layout: T1/T2/T3 with the relative gain over standard collaboration",
          "10": "Table 10 layout: ReGround's candidate pool size M and the oracle condition",
          "11": "Table 11 layout: tokens per instance"}
PAGES = {"1": 7, "10": 39, "11": 40}
NOTE = ("Built from compare's options (the LM, the data and the condition, the T2 judge, the programs' options, the "
        "seed); a cell shows the run of exactly that configuration, or 'not run'. The paper's published numbers "
        "are beside ours in `groundstate experiment table reground-table{n}`.")


def setting_label(settings: OffQueryData) -> str:
    """The setting in words: ``mediQ_easy.json, unreliable`` or ``synthetic healthcare/main n=20, unreliable``."""
    if settings.data == "synthetic":
        where = f"synthetic {settings.domain}/{settings.variant} n={settings.n}"
        where += f" seed={settings.synthetic_seed}" if settings.synthetic_seed else ""
    else:
        where = Path(settings.data).name
    return f"{where}, {settings.condition}"


def _fields(settings: CompareSettings, model: type, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The values ``settings`` has for the fields of ``model`` (``None`` values left out: the field's default)."""
    return {k: v for k, v in settings.model_dump(include=set(model.model_fields)).items()
            if v is not None and k not in skip}


def program_settings(name: str, settings: CompareSettings) -> dict[str, Any]:
    """The options program ``name`` takes from compare's settings (ReGround's, or the baselines')."""
    return _fields(settings, ReGroundOptions if name == "reground" else BaselineOptions)


def _base(number: str, settings: CompareSettings, model: str) -> dict[str, Any]:
    """What every table's spec shares: the experiment, the setting as its one data value, the model, the judge."""
    return {
        "experiment": {"name": f"compare-table{number}", "title": TITLES[number], "paper": "reground",
                       "table": f"Table {number}", "page": PAGES[number], "note": NOTE.format(n=number)},
        "data": {"setting": {"label": setting_label(settings), **_fields(settings, OffQueryData, ("judge_lm",))}},
        "defaults": {"data": "setting", "judge": settings.judge_lm, "seeds": [settings.seed]},
        "axes": {"model": [model], "data": ["setting"]},
    }


def _methods(names: Sequence[str], settings: CompareSettings) -> list[dict[str, Any]]:
    return [{"label": LABELS.get(n, n), "key": n, "task": n, "settings": program_settings(n, settings)}
            for n in dict.fromkeys(names)]


def paper_specs(settings: CompareSettings, programs: Sequence[str] | None = None,
                model: str = "embedded") -> dict[str, Spec]:
    """The specs of Tables 1, 10 and 11 (keys ``"1"``, ``"10"``, ``"11"``) from compare's settings, the programs it
    names (none: the paper's, see the module docstring) and the model under test (a label: the LMs themselves are
    the caller's, :func:`paper_tables`).

    Raises:
        InputError: a spec that does not validate (an unknown program name reaches the task registry as one).
    """
    first = list(programs or TABLE1_PROGRAMS)
    raw1 = _base("1", settings, model)
    relative = [{"name": f"gain_{m}", "metric": m, "axis": "method", "base": "standard", "kind": "gain"}
                for m in METRICS] if "standard" in first else []
    raw1["axes"]["method"] = _methods(first, settings)
    raw1["layout"] = {"rows": ["model", "method"], "columns": ["data"],
                      "metrics": [*METRICS, *(r["name"] for r in relative)], "relative": relative,
                      "percent": [r["name"] for r in relative],
                      "labels": {**{m: m.upper() for m in METRICS}, **{f"gain_{m}": f"{m.upper()} gain (%)"
                                                                        for m in METRICS}}}
    raw10 = _base("10", settings, model)
    raw10["defaults"] |= {"task": "reground", "settings": program_settings("reground", settings)}
    sizes = sorted({*CANDIDATES, settings.max_candidates})
    raw10["axes"]["variant"] = [*({"label": f"M = {m}", "key": f"M{m}",
                                   "settings": {"max_candidates": m, "oracle_t1": False}} for m in sizes),
                                {"label": "Oracle", "key": "oracle",
                                 "settings": {"max_candidates": settings.max_candidates, "oracle_t1": True},
                                 "note": "the misleading agent is given (--oracle-t1): attribution skipped"}]
    raw10["layout"] = {"rows": ["model", "variant"], "columns": ["data"], "metrics": list(METRICS),
                       "labels": {m: m.upper() for m in METRICS}}
    raw11 = _base("11", settings, model)
    raw11["axes"]["method"] = _methods(list(programs or TABLE11_PROGRAMS), settings)
    raw11["layout"] = {"rows": ["model", "method"], "columns": ["data"],
                       "metrics": ["tokens_input", "tokens_output", "tokens_total", "cached_calls"],
                       "digits": {"tokens_input": 0, "tokens_output": 0, "tokens_total": 0, "cached_calls": 1},
                       "labels": {"tokens_input": "input", "tokens_output": "output", "tokens_total": "total",
                                  "cached_calls": "cached calls (not billed)"}}
    specs = {}
    for number, raw in (("1", raw1), ("10", raw10), ("11", raw11)):
        spec = Spec.parse(raw, file="compare --paper-tables")
        spec.source = f"compare --paper-tables (Table {number})"
        check_spec(spec)
        specs[number] = spec
    return specs


def paper_tables(settings: CompareSettings, programs: Sequence[str] | None, run: Any, *,
                 lms: Callable[[Any], tuple[Any, Any]], model: str,
                 note: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Tables 1, 10 and 11 (:func:`paper_specs`) built by the experiment layer from the runs under ``run.out``;
    no LM is called.

    Args:
        settings, programs, model: as for :func:`paper_specs`.
        run: the run settings compare ran with (``out``, ``limit``: the runs' identity).
        lms: ``cell -> (default LM, LMConfig)``: the LMs compare ran with (so every cell plans the run id compare
            gave the program).
        note: where the tasks' notes go.

    Returns:
        The built :class:`~groundstate.eval.experiments.table.Table` objects by table number, without the paper's
        columns (they carry no published numbers).

    Raises:
        ConfigError: a stored run that differs from its cell, or a cell two stored runs claim (one line).
    """
    from groundstate.eval.experiments.table import build_table  # noqa: PLC0415 (--help stays light)

    tables = {}
    for number, spec in paper_specs(settings, programs, model).items():
        table = build_table(spec, run, lms=lms, note=note)
        table.show_paper = False
        tables[number] = table
    return tables


def stray_runs(out: str | Path, tables: Mapping[str, Any]) -> list[str]:
    """The stored OffQuery runs under ``out`` (shards left out) that are no cell of ``tables``: runs of another LM,
    decoding, judge, data or options, which a table built from "every run in the directory" would have mixed in.
    In name order; a directory that is not a readable run is skipped (no table reads it)."""
    from groundstate.errors import InputError  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.runs import run_entry  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.tasks import offquery_names  # noqa: PLC0415 (--help stays light)

    used = {run_id for table in tables.values() for run_id in table.runs.values()}
    names = set(offquery_names())
    found = []
    for run_dir in sorted(Path(out).iterdir()) if Path(out).is_dir() else []:
        if not run_dir.is_dir() or not (run_dir / "config.json").is_file():
            continue
        try:
            config = run_entry(run_dir)["config"]
        except InputError:
            continue
        if config.get("program") in names and not config.get("shard") and str(config.get("run_id")) not in used:
            found.append(str(config.get("run_id", run_dir.name)))
    return found


def write_tables(tables: Mapping[str, Any], out_dir: str | Path, png: bool = True) -> dict[str, str]:
    """Write ``table1|10|11.md``, ``.json`` and (``png``, with matplotlib) ``.png`` into ``out_dir``
    (:func:`groundstate.eval.experiments.render.write_table`); their paths, as ``table<n>``, ``table<n>_json`` and
    ``table<n>_png``."""
    from groundstate.eval.experiments.render import write_table  # noqa: PLC0415 (--help stays light)

    paths = {}
    for number, table in tables.items():
        written = write_table(table, out_dir, stem=f"table{number}", png=png)
        paths[f"table{number}"] = written["md"]
        paths[f"table{number}_json"] = written["json"]
        if "png" in written:
            paths[f"table{number}_png"] = written["png"]
    return paths
