"""What a cell will cost, without any LM call: a dry run of its planned program (and its LM judge) over its
records with counting scripted LMs, writing no run files.

Each real LM of the cell (the default, each per-role LM, the judge's) is stood in for by a scripted LM of the same
model name (:class:`~groundstate.testing.ScriptedEngine`, which fills any JSON schema with placeholder values);
the program runs on every record the run would run (``limit`` and ``shard`` applied) and its scorer scores each
prediction, so the LM judge is asked as often as it will be. The requests each stand-in received are the calls;
their tokens are counted with the model's tokenizer where LiteLLM has it offline (OpenAI and Azure models:
``litellm.token_counter``, tiktoken), else approximated as the scripted engine does (4 characters per token);
dollars come from ``litellm.cost_per_token`` where LiteLLM prices the model (never fetched: the local map).

What the counts assume, and the output says: the answers are the scripted LM's placeholders, so a program that
branches on its LM's answers (ReGround's ``stop_early``, a discussion that ends when the agents agree) may make
another number of calls with a real LM; output tokens are those of placeholder answers (a real model writes
more); prompts are counted in the JSON adapter's format (what groundstate uses for the embedded LM; DSPy's chat
adapter writes prompts of about the same size). Simulated agents call no LM: their cells cost 0.

Cells that differ only in their LMs run the same program on the same records, so one dry run serves them all
(the transcript is recounted with each cell's tokenizer and prices). A task whose plan cannot be dry-run gets a
counter of its own (:data:`COUNTERS`); the DHD steps say they are not counted here, and a Consilience
feature-ablation row with simulated agents is counted as calling no LM without being fitted.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from groundstate.eval.experiments.cells import PlannedCell
from groundstate.eval.run_settings import RunSettings
from groundstate.eval.runner import program_inputs, select_records
from groundstate.lm.config import LMConfig

DRY_RUN = "dry run"
NO_LM = "no LM call (simulated agents)"
EXACT_PROVIDERS = ("openai", "azure")
ASSUMPTIONS = ("counts assume the scripted LM's placeholder answers: where a program branches on its LM's answers "
               "(ReGround's stop_early, a discussion that stops at agreement) a real LM can change the number of "
               "calls; output tokens are those of placeholder answers (a real model writes more); tokens marked ~ "
               "are approximated at 4 characters per token (LiteLLM has no offline tokenizer for that model)")


@dataclass
class Call:
    """One request a stand-in LM received: its slot (``default``, ``role:<pattern>`` or ``judge``), its messages,
    the reply, and the tokens the scripted engine reported."""

    slot: str
    messages: list[dict[str, str]]
    reply: str
    input_tokens: int
    output_tokens: int


@dataclass
class Usage:
    """What one model of a cell will cost: calls, input/output tokens (``exact``: counted with the model's own
    tokenizer), dollars (``None``: LiteLLM has no price for it)."""

    model: str
    role: str
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    exact: bool = False
    cost: float | None = None


@dataclass
class CellCount:
    """A cell's count: how it was made (``method``), the records, the records whose dry run failed, and the usage
    per model."""

    method: str
    records: int
    failed: int = 0
    usage: list[Usage] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return sum(u.calls for u in self.usage)

    @property
    def input_tokens(self) -> int:
        return sum(u.input_tokens for u in self.usage)

    @property
    def output_tokens(self) -> int:
        return sum(u.output_tokens for u in self.usage)

    @property
    def exact(self) -> bool:
        return all(u.exact for u in self.usage)

    @property
    def cost(self) -> float | None:
        """Dollars, ``None`` when some model that is called has no price."""
        costs = [u.cost for u in self.usage if u.calls]
        return None if any(c is None for c in costs) else float(sum(costs))


class StandIns:
    """Scripted stand-ins for a cell's real LMs, one engine per slot, and the requests each received."""

    def __init__(self) -> None:
        from groundstate.testing import ScriptedEngine  # noqa: PLC0415 (--help stays light)

        self.engines: dict[str, Any] = {}
        self.make_engine = lambda: ScriptedEngine(input_tokens=None, output_tokens=None)
        self.lms: dict[str, Any] = {}

    def lm(self, real: Any, slot: str) -> Any:
        """The stand-in of ``real`` (same model name and decoding) in ``slot``."""
        import dspy  # noqa: PLC0415 (heavy: dspy)

        from groundstate.testing import AsyncScriptedEngine  # noqa: PLC0415 (--help stays light)

        if slot not in self.lms:
            engine = self.engines[slot] = self.make_engine()
            kwargs = {k: v for k, v in (getattr(real, "kwargs", None) or {}).items()
                      if k in ("temperature", "max_tokens") and v is not None}
            self.lms[slot] = dspy.LM(getattr(real, "model", "scripted/engine"), engine=engine,
                                     async_engine=AsyncScriptedEngine(engine), cache=False, **kwargs)
        return self.lms[slot]

    def calls(self) -> list[Call]:
        return [Call(slot, r.messages, r.reply or "", int(r.input_tokens or 0), int(r.output_tokens or 0))
                for slot, engine in self.engines.items() for r in engine.requests]


class CountingConfig(LMConfig):
    """An :class:`~groundstate.lm.config.LMConfig` whose LMs are the stand-ins of another's, by role."""

    def __init__(self, real: LMConfig, stand_ins: StandIns):
        super().__init__(default=real.default, roles=real.roles, source=real.source)
        self.real, self.stand_ins = real, stand_ins

    def lm_for(self, role: str | None = None):
        entry = self.real.spec_for(role)
        pattern = next((p for p, e in self.real.roles.items() if e is entry), None)
        return self.stand_ins.lm(self.real.lm_for(role), "default" if pattern is None else f"role:{pattern}")


def _inputs(planned: Any, record: Any) -> dict[str, Any]:
    """The program's inputs for ``record``, as the durable runner makes them."""
    return program_inputs(record, planned.inputs)


def dry_run(cell: PlannedCell, run: RunSettings) -> tuple[list[Call], int, int]:
    """Run the cell's program (and scorer) over its records with stand-in LMs; ``(calls, records, failed)``."""
    import dspy  # noqa: PLC0415 (heavy: dspy)

    from groundstate.eval.assemble import assemble  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.task import RunContext  # noqa: PLC0415 (--help stays light)
    from groundstate.lm.adapters import json_adapter  # noqa: PLC0415 (--help stays light)

    stand_ins = StandIns()
    real_lm, real_config = cell.context.lm_pair() if cell.uses_lms else (None, None)
    judge = cell.task.judge_for(cell.settings, cell.context) if hasattr(cell.task, "judge_for") else None
    if getattr(judge, "lm", None) is not None:
        judge = copy.copy(judge)
        judge.lm = stand_ins.lm(judge.lm, "judge")
        judge.adapter = json_adapter()
    default = stand_ins.lm(real_lm, "default") if real_lm is not None else None
    pair = (default, CountingConfig(real_config, stand_ins)) if real_lm is not None else None
    context = RunContext(lms=cell.context.lms, make_lms=(lambda: pair) if pair else _no_lm, note=lambda text: None,
                         judge=judge)
    _, _, planned = assemble(cell.task, cell.settings, context, run=run, source=cell.cell.source)
    records = select_records(planned.records or [], run.limit, run.shard)
    failed = 0
    scope = dspy.context(lm=default, adapter=json_adapter()) if default is not None else contextlib.nullcontext()
    with scope:
        for record in records:
            try:
                prediction = planned.program(**_inputs(planned, record))
            except Exception:  # a placeholder answer a program cannot use: counted apart, as the runner would
                failed += 1
                continue
            if planned.scorer is not None:
                with contextlib.suppress(Exception):
                    planned.scorer(record, prediction)
    return stand_ins.calls(), len(records), failed


def _no_lm() -> tuple[Any, Any]:
    from groundstate.errors import ConfigError  # noqa: PLC0415 (--help stays light)

    raise ConfigError("this cell's plan asked for no LM, but its dry run did")


def slot_models(cell: PlannedCell) -> dict[str, str]:
    """Each slot's model name for this cell (the stand-ins of a shared dry run are recounted per cell)."""
    models: dict[str, str] = {}
    if cell.uses_lms:
        lm, config = cell.context.lm_pair()
        models["default"] = getattr(lm, "model", "?")
        for pattern in config.roles:
            models[f"role:{pattern}"] = getattr(config.lm_for(pattern), "model", "?")
    judge = cell.task.judge_for(cell.settings, cell.context) if hasattr(cell.task, "judge_for") else None
    if getattr(judge, "lm", None) is not None:
        models["judge"] = getattr(judge.lm, "model", "?")
    return models


def _provider(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else ""


def count_tokens(model: str, calls: Sequence[Call]) -> tuple[int, int, bool]:
    """``(input, output, exact)`` tokens of ``calls`` for ``model`` (see the module docstring)."""
    from groundstate.metering import model_price  # noqa: PLC0415 (--help stays light)

    if _provider(model) in EXACT_PROVIDERS and model_price(model) is not None:
        from groundstate.compat import quiet_litellm  # noqa: PLC0415 (--help stays light)

        litellm = quiet_litellm()
        inp = sum(int(litellm.token_counter(model=model, messages=c.messages)) for c in calls)
        out = sum(int(litellm.token_counter(model=model, text=c.reply)) for c in calls)
        return inp, out, True
    return sum(c.input_tokens for c in calls), sum(c.output_tokens for c in calls), False


def usage_of(calls: Sequence[Call], models: dict[str, str]) -> list[Usage]:
    """Calls grouped by model and role (program or judge), with tokens and dollars."""
    from groundstate.metering import call_cost, model_price  # noqa: PLC0415 (--help stays light)

    groups: dict[tuple[str, str], list[Call]] = {}
    for call in calls:
        role = "judge" if call.slot == "judge" else "program"
        groups.setdefault((models.get(call.slot, "?"), role), []).append(call)
    out = []
    for (model, role), group in groups.items():
        inp, outp, exact = count_tokens(model, group)
        priced = model_price(model) is not None
        cost = call_cost(model, inp, outp) if priced else None
        out.append(Usage(model, role, len(group), inp, outp, exact, cost))
    return out


def dry_run_key(cell: PlannedCell, run: RunSettings) -> str:
    """What decides a dry run's transcript: the run config without its LMs, the role patterns, limit and shard."""
    config = {k: v for k, v in cell.planned.config.items() if k not in ("lm", "lm_config")}
    roles = sorted(cell.cell.roles)
    return json.dumps({"config": config, "roles": roles, "limit": run.limit, "shard": run.shard,
                       "lms": cell.uses_lms}, sort_keys=True, default=str)


Counter = Callable[[PlannedCell, RunSettings, dict[str, Any]], CellCount]


def count_by_dry_run(cell: PlannedCell, run: RunSettings, memo: dict[str, Any]) -> CellCount:
    """The default counter: a dry run (shared by cells that differ only in their LMs, through ``memo``)."""
    if cell.planned.records is None:
        return CellCount("nothing to run (the plan says so)", 0)
    key = dry_run_key(cell, run)
    if key not in memo:
        memo[key] = dry_run(cell, run)
    calls, records, failed = memo[key]
    method = DRY_RUN if calls or cell.uses_lms else NO_LM
    return CellCount(method, records, failed, usage_of(calls, slot_models(cell)) if calls else [])


def not_counted(reason: str) -> Counter:
    """A counter for a task whose plan cannot be dry-run: the count says why."""
    def counter(cell: PlannedCell, run: RunSettings, memo: dict[str, Any]) -> CellCount:
        records = select_records(cell.planned.records or [], run.limit, run.shard)
        return CellCount(f"not counted: {reason}", len(records))

    return counter


def count_fitted_row(cell: PlannedCell, run: RunSettings, memo: dict[str, Any]) -> CellCount:
    """A Consilience feature-ablation row (``consilience-features``): a dry run when its agents call an LM (the dry
    run fits the row, so its exploration and calibration calls are counted too); with simulated agents it calls no
    LM (its MLP controller calls none either), counted without fitting it."""
    if cell.uses_lms:
        return count_by_dry_run(cell, run, memo)
    return CellCount(NO_LM, len(select_records(cell.planned.records or [], run.limit, run.shard)))


#: Counters by task name (default: :func:`count_by_dry_run`); the DHD steps' plans touch their cache.
COUNTERS: dict[str, Counter] = {
    **{name: not_counted("a DHD step's calls depend on its cache (see the DHD call structure in its docs)")
       for name in ("dhd-generate", "dhd-replay", "dhd-mask")},
    "consilience-features": count_fitted_row}


def count_cell(cell: PlannedCell, run: RunSettings, memo: dict[str, Any]) -> CellCount:
    """The count of one planned cell, by its task's counter."""
    return COUNTERS.get(cell.task.name, count_by_dry_run)(cell, run, memo)
