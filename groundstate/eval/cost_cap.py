"""``--max-cost USD``: a cap on the priced LM spend of one command's durable runs.

One :class:`CostCap` is shared by every run a command starts (``compare`` runs one per program, ``evaluate`` two,
``experiment run`` one per cell), through :meth:`~groundstate.eval.run_settings.RunSettings.cost_cap`. The
runner asks it before each record starts (:meth:`CostCap.admit`) and tells it what each record cost when it
ends (:meth:`CostCap.settle`). Once the spend reaches the cap, no new record starts; records already running
finish and are written (their calls are paid for), so the spend can pass the cap by what the records in flight
cost (at most ``--threads`` records). The run then stops with
:class:`~groundstate.eval.runner.CostCapStopped` (a :class:`~groundstate.eval.runner.RunAborted`: the CLI prints
the summary, says why, and exits 1), its summary's ``stopped_reason`` naming the spend and the cap. Running the
same command again resumes: finished records make no call, and the new command may spend up to its cap again.

What is counted: the dollars LiteLLM's cost map gives for the usage each LM call reports (:mod:`groundstate.metering`),
the program's calls and the T2 judge's calls while scoring; calls DSPy's cache answered cost nothing. Under Ray the
driver counts what each finished record's row reports: ``cost_usd`` (the program's calls) and the judge's dollars,
which a worker under a cap adds to the row under :data:`SCORING_KEYS` and the driver takes out before the row is
written (:meth:`CostCap.settle_row`). The cap is not part of the run id: it does not change any result.

An LM that has no price (the embedded model, a scripted LM, a model LiteLLM does not know) cannot be capped, so
:func:`~groundstate.metering.check_priced` refuses the run before any call, naming the model; should a record still
call an unpriced model, the run stops after it with a reason saying so.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from groundstate.errors import ConfigError
from groundstate.metering import check_priced as check_priced
from groundstate.metering import model_price
from groundstate.metering import program_models as program_models

LM_KEYS = ("lm", "lm_config", "judge_lm")
"""Run-config keys (at any depth) whose value describes LMs the run calls (:func:`described_models`)."""


SCORING_KEYS = ("_scoring_cost_usd", "_scoring_calls")
"""What a Ray worker under a cap adds to a row: the judge's dollars while scoring the record (``None`` when a model
it called has no price) and its calls that reached a model; :meth:`CostCap.settle_row` removes them."""


def scoring_fields(scoring: Any) -> dict[str, Any]:
    """:data:`SCORING_KEYS` of a record's scoring meter."""
    calls = scoring.reached_model()
    return {SCORING_KEYS[0]: scoring.cost_usd() if calls else 0.0, SCORING_KEYS[1]: calls}


class CostCap:
    """The spend cap of one command's runs (thread-safe; see the module docstring).

    Args:
        max_usd: the cap in dollars (above 0).
    """

    def __init__(self, max_usd: float):
        if not max_usd > 0:
            raise ConfigError(f"--max-cost must be above 0 dollars, got {max_usd}")
        self.max_usd = float(max_usd)
        self.settled_usd = 0.0
        self.unpriced: str | None = None  # why the spend is unknown (an unpriced model was called)
        self._live: set[Any] = set()
        self._lock = threading.Lock()

    def spent(self) -> float:
        """Dollars spent so far: finished records, and the calls of records still running."""
        with self._lock:
            live = list(self._live)
            settled = self.settled_usd
        return settled + sum(_meter_dollars(m) for m in live)

    def reached(self) -> bool:
        """Whether no new record may start: the spend reached the cap, or it became unknown."""
        return self.unpriced is not None or self.spent() >= self.max_usd

    def admit(self, *meters: Any) -> bool:
        """``True`` and the record's ``meters`` counted live while it runs, or ``False``: the cap is reached and the
        record must not start."""
        if self.reached():
            return False
        with self._lock:
            self._live.update(meters)
        return True

    def settle(self, *meters: Any) -> None:
        """A record admitted with ``meters`` ended: its spend is added for good."""
        with self._lock:
            for meter in meters:
                self._live.discard(meter)
                unpriced = sorted(m for m in meter.models | set(meter.usage_data) if model_price(m) is None)
                if unpriced and self.unpriced is None:
                    self.unpriced = f"the LM '{unpriced[0]}' has no price in LiteLLM's cost map"
                self.settled_usd += _meter_dollars(meter)

    def settle_row(self, row: dict[str, Any]) -> None:
        """A record that ran elsewhere (a Ray worker) ended with ``row``: its ``cost_usd`` and its judge's dollars
        (:data:`SCORING_KEYS`, removed from ``row``) are added."""
        cost = row.get("cost_usd")
        judge_cost, judge_calls = row.pop(SCORING_KEYS[0], 0.0), int(row.pop(SCORING_KEYS[1], 0) or 0)
        with self._lock:
            if isinstance(cost, int | float):
                self.settled_usd += float(cost)
            elif int(row.get("lm_calls") or 0) > int(row.get("cached_calls") or 0) and self.unpriced is None:
                self.unpriced = f"record '{row.get('id')}' called an LM with no price in LiteLLM's cost map"
            if isinstance(judge_cost, int | float):
                self.settled_usd += float(judge_cost)
            elif judge_calls and self.unpriced is None:
                self.unpriced = (f"the judge of record '{row.get('id')}' called an LM with no price in LiteLLM's "
                                 "cost map")

    def describe(self) -> dict[str, Any]:
        """``{"max_usd", "spent_usd"}`` (and ``unpriced`` when the spend became unknown), for ``summary.json``."""
        out: dict[str, Any] = {"max_usd": self.max_usd, "spent_usd": round(self.spent(), 6)}
        if self.unpriced:
            out["unpriced"] = self.unpriced
        return out

    def reason(self, done: int, selected: int) -> str:
        """Why a run stopped here: the spend and the cap, the records done, and how to go on."""
        left = f"{done} of {selected} records done, the other {selected - done} not started"
        if self.unpriced is not None:
            return (f"stopped: --max-cost cannot be kept because {self.unpriced} ({left}); run the same command "
                    "again without --max-cost to finish")
        return (f"stopped at the cost cap: {usd(self.spent())} spent by this command, --max-cost {usd(self.max_usd)} "
                f"({left}); run the same command again to resume")


def usd(dollars: float) -> str:
    """Dollars for a reader: cents from one dollar up (``$12.35``), three significant digits below (``$0.00135``)."""
    return f"${dollars:,.2f}" if dollars >= 1 else f"${dollars:.3g}"


def _meter_dollars(meter: Any) -> float:
    dollars = meter.cost_usd() if meter.calls else 0.0
    return float(dollars or 0.0)  # unpriced models are caught by settle and check_priced


def described_models(config: Any) -> set[str]:
    """The model names a run config describes (the values of :data:`LM_KEYS` at any depth: an LM description's
    ``model``, an LM configuration's default and roles)."""
    found: set[str] = set()

    def lms(value: Any) -> None:
        if not isinstance(value, Mapping):
            return
        if isinstance(value.get("model"), str):
            found.add(value["model"])
        lms(value.get("default"))
        roles = value.get("roles")
        for role in roles.values() if isinstance(roles, Mapping) else ():
            lms(role)

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                if key in LM_KEYS:
                    lms(item)
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    walk(config)
    return found
