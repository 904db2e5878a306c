"""``tune``: fit any DSPy program to data with one of DSPy's optimizers, within a budget, metered.

Optimizers: ``bootstrap`` (``BootstrapFewShot``), ``random-search`` (``BootstrapFewShotWithRandomSearch``),
``mipro`` (``MIPROv2``, with explicit candidate and trial counts or one of its ``auto`` presets:
:attr:`Budget.auto`) and ``gepa`` (``GEPA``, with a reflection LM of the user's choice and a capped number
of metric calls). The three that choose among candidate programs need a validation set, so the choice is
never made on the examples the candidates were built from.

``tune`` knows no benchmark: like DSPy's teleprompters it takes a metric callable ``(example, prediction,
trace=None) -> float`` (for OffQuery programs, :func:`groundstate.eval.reground.metrics.offquery_metric`). GEPA
needs a feedback metric with its five arguments; it is ``feedback_metric`` when given, else the metric's own
``feedback`` attribute (which ``offquery_metric``, ``t1_metric``, ``t2_metric`` and ``t3_metric`` set: the score
with the feedback text groundstate writes), else the metric itself; whichever it is, :func:`gepa_feedback_metric`
adapts a metric that does not take GEPA's arguments, so no metric makes GEPA fail on every call.

``trainable`` restricts what the optimizer may touch (:mod:`groundstate.optimizers.targets`). The program is
scored before and after on the training set and, when given, the validation set; every LM call made during
tuning (the program's, the proposer's, the reflection LM's) is counted with its tokens.

Optimization never silently does nothing: ``tune`` refuses to start with no LM, or with a GEPA reflection LM
that fails a one-call probe; it stops (:class:`~groundstate.errors.OptimizationFailed`, nothing to save) when
the share of failed metric calls passes ``max_failed_share`` (over all calls, and over the optimizer's own calls
alone, so a metric that fails only as the optimizer calls it is not hidden by the scoring calls that worked); and
it flags a result whose program state equals
the starting state (:attr:`TuneResult.unchanged`).

``max_cost`` caps the priced spend of tuning (every LM it calls must have a price in LiteLLM's map, checked before
any call). Once the spend reaches the cap, every further LM call is refused before it is made
(:func:`groundstate.metering.cap_meter`; calls already in flight finish): the optimizer sees failed calls, which
DSPy's optimizers survive and wind down on. The cap reached while the starting program is scored, or an optimizer
that gives up on the refused calls, leaves nothing to save (:class:`~groundstate.errors.CostCapReached`, exit 1);
an optimizer that returns a program keeps what it did before the cap (its choice rests on the calls made before
it), returned with :attr:`TuneResult.stopped_reason` set and no score after (measuring one would spend past the
cap).
A ``listener`` hears the phases, the metric calls and the LM calls as they happen (``groundstate optimize`` shows
them as one progress line, :class:`groundstate.eval.progress.TuneProgress`), and ``quiet=True`` holds DSPy's own
logs, prints and tqdm bars back meanwhile (:mod:`groundstate.optimizers.quiet`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import dspy

from groundstate.errors import ConfigError, CostCapReached, GroundstateError, OptimizationFailed, scrub_secrets
from groundstate.metering import cap_meter, check_priced, meter_context, model_name, new_meter, program_models
from groundstate.optimizers.metric_calls import CountingMetric as CountingMetric
from groundstate.optimizers.metric_calls import accepts_gepa_arguments as accepts_gepa_arguments
from groundstate.optimizers.metric_calls import gepa_feedback_metric as gepa_feedback_metric
from groundstate.optimizers.quiet import quiet_dspy
from groundstate.optimizers.targets import frozen_except, trainable_names

logger = logging.getLogger(__name__)

OPTIMIZERS = ("bootstrap", "random-search", "mipro", "gepa")
NEEDS_VALSET = {"random-search", "mipro", "gepa"}
MAX_FAILED_SHARE = 0.5
"""Default :func:`tune` ``max_failed_share``: stop when more than half of the metric calls failed."""


MIPRO_PRESETS = ("light", "medium", "heavy")
"""MIPROv2's ``auto`` presets: how many candidates, trials and validation examples it spends, by DSPy's table."""


@dataclass
class Budget:
    """How much an optimizer may spend. Only the fields an optimizer uses matter to it.

    Attributes:
        max_bootstrapped_demos: demos bootstrapped per predictor (bootstrap, random-search, mipro).
        max_labeled_demos: raw training examples used as demos per predictor (0 suits multi-stage programs,
            whose raw examples do not have each stage's fields).
        max_rounds: bootstrapping rounds (bootstrap, random-search).
        num_candidate_programs: candidate programs tried (random-search).
        num_candidates: instruction / demo-set candidates (mipro; default 3 unless ``auto`` is set).
        num_trials: search trials (mipro; default 6 unless ``auto`` is set).
        max_metric_calls: metric calls, the whole budget of a GEPA run (gepa).
        auto: MIPROv2's preset (``light``, ``medium`` or ``heavy``), passed to ``dspy.MIPROv2(auto=...)``, which
            then chooses the candidates, the trials and the validation examples it scores on; it replaces
            ``num_candidates`` and ``num_trials``, so giving either with it is refused.

    Raises:
        ConfigError: an unknown ``auto``, or ``auto`` together with ``num_candidates`` or ``num_trials``.
    """

    max_bootstrapped_demos: int = 2
    max_labeled_demos: int = 0
    max_rounds: int = 1
    num_candidate_programs: int = 4
    num_candidates: int | None = None
    num_trials: int | None = None
    max_metric_calls: int = 60
    auto: str | None = None

    def __post_init__(self) -> None:
        if self.auto is None:
            self.num_candidates = 3 if self.num_candidates is None else self.num_candidates
            self.num_trials = 6 if self.num_trials is None else self.num_trials
            return
        if self.auto not in MIPRO_PRESETS:
            raise ConfigError(f"unknown MIPROv2 preset auto='{self.auto}': use {', '.join(MIPRO_PRESETS)}")
        given = [name for name in ("num_candidates", "num_trials") if getattr(self, name) is not None]
        if given:
            flags = {"num_candidates": "num_candidates (--candidates)", "num_trials": "num_trials (--trials)"}
            raise ConfigError(f"the MIPROv2 preset auto='{self.auto}' (--budget {self.auto}) chooses the candidates "
                              f"and trials itself: give it or {' and '.join(flags[g] for g in given)}, not both")

    def check(self, optimizer: str) -> None:
        """Raise :class:`ConfigError` when the fields ``optimizer`` uses leave it nothing to do, or a preset is
        given to an optimizer other than ``mipro``."""
        if self.auto is not None and optimizer != "mipro":
            raise ConfigError(f"the preset auto='{self.auto}' (--budget {self.auto}) is MIPROv2's: use it with the "
                              f"optimizer 'mipro', not '{optimizer}'")
        needed = {
            "bootstrap": ("max_rounds",),
            "random-search": ("num_candidate_programs", "max_rounds"),
            "mipro": () if self.auto else ("num_candidates", "num_trials"),
            "gepa": ("max_metric_calls",),
        }[optimizer]
        for name in needed:
            if getattr(self, name) <= 0:
                raise ConfigError(f"the budget for '{optimizer}' needs {name.replace('_', '-')} > 0")
        if optimizer in ("bootstrap", "random-search") and self.max_bootstrapped_demos + self.max_labeled_demos <= 0:
            raise ConfigError(f"a budget of zero demos leaves '{optimizer}' nothing to change")
        if any(isinstance(v, int | float) and v < 0 for v in asdict(self).values()):
            raise ConfigError("budget values must not be negative")


@dataclass
class TuneResult:
    """The optimized program and what it cost.

    Attributes:
        program: the optimized program (a copy; the input program is unchanged).
        scores: ``{"train": {"before", "after"}, "val": {...}}`` (means of the metric).
        lm_calls, input_tokens, output_tokens: everything spent while tuning (including evaluations).
        seconds: wall time.
        settings: the optimizer, its budget, the metric spec, the trainable predictors.
        unchanged: the optimized program's state (instructions, demos) equals the starting program's: the
            optimizer found nothing to change (see :func:`state_hash`).
        failed_share: the share of metric calls that failed (an LM failure that ended a program call, or a
            metric that raised).
        cost_usd: the priced dollars of every call (``None`` when a model called has no price).
        stopped_reason: why tuning stopped early (``max_cost`` reached while optimizing), ``None`` if it did not.
    """

    program: Any
    scores: dict[str, dict[str, float | None]]
    lm_calls: int
    input_tokens: int
    output_tokens: int
    seconds: float
    settings: dict[str, Any] = field(default_factory=dict)
    unchanged: bool = False
    failed_share: float = 0.0
    cost_usd: float | None = None
    stopped_reason: str | None = None


def state_hash(program: Any) -> str:
    """A short hash of a program's class and DSPy state (instructions, demos), like the runner's
    ``program_state_hash``: two programs with the same hash behave the same."""
    try:
        state = program.dump_state()
    except Exception:  # a program that cannot dump its state is identified by its class only
        state = {}
    text = json.dumps({"class": type(program).__qualname__, "state": state}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def evaluate(program: Any, examples: Sequence[Any], metric: Callable, threads: int = 1,
             progress: bool = False) -> float | None:
    """The mean of ``metric`` over ``examples`` (a failed example scores 0), via ``dspy.Evaluate``."""
    if not examples:
        return None
    evaluator = dspy.Evaluate(devset=list(examples), metric=metric, num_threads=threads,
                              display_progress=progress, display_table=False, provide_traceback=False,
                              failure_score=0.0, max_errors=len(examples) + 1)
    result = evaluator(program)
    values = [float(score) if score is not None else 0.0 for _, _, score in result.results]
    return sum(values) / len(values) if values else None


def tune(program: Any, trainset: Sequence[Any], valset: Sequence[Any] | None = None, metric: Callable | None = None,
         optimizer: str = "bootstrap", budget: Budget | None = None, trainable: Sequence[str] | None = None,
         reflection_lm: Any = None, feedback_metric: Callable | None = None, threads: int = 1, seed: int = 0,
         progress: bool = True, max_failed_share: float = MAX_FAILED_SHARE,
         max_cost: float | None = None, listener: Any = None, quiet: bool = False) -> TuneResult:
    """Optimize ``program`` on ``trainset`` (choosing on ``valset``) and report scores before and after.

    Args:
        program: any ``dspy.Module``.
        trainset, valset: ``dspy.Example`` lists (``OffQueryInstance.to_example()`` for OffQuery programs).
        metric: a DSPy metric callable ``(example, prediction, trace=None) -> float``; its ``spec`` (or name) is
            recorded in the settings.
        optimizer: ``bootstrap``, ``random-search``, ``mipro`` or ``gepa``.
        budget: what the optimizer may spend (:class:`Budget`).
        trainable: glob patterns of the predictors the optimizer may touch (``None``: all).
        reflection_lm: GEPA's reflection LM (default: the configured LM).
        feedback_metric: GEPA's feedback metric ``(gold, pred, trace, pred_name, pred_trace) -> Prediction(score,
            feedback)`` (default: ``metric.feedback`` if the metric has one, else ``metric``); a metric without
            GEPA's arguments is adapted by :func:`gepa_feedback_metric`.
        threads: threads for evaluation and for the optimizers that take them.
        seed: the optimizers' seed.
        progress: show DSPy's progress bars.
        max_failed_share: stop when more than this share of the metric calls failed (checked after the
            "before" scores, after the optimizer, on the optimizer's own calls alone, and at the end); 1.0 stops
            only when every call failed.
        max_cost: stop once the priced spend reaches this many dollars (``None``: no cap; module docstring).
        listener: told of the work as it happens (each method optional): ``on_phase(text)`` when tuning moves on
            (``scoring the starting program``, ``optimizing``, ``scoring the optimized program``),
            ``on_metric_call(raised)`` after each metric call, and ``on_lm_call(failed)`` with
            ``on_lm_usage(input_tokens, output_tokens)`` (both or neither) after each LM call
            (:class:`groundstate.eval.progress.TuneProgress` is one); called from worker threads.
        quiet: hold DSPy's logs, prints and progress bars back while tuning (:func:`~groundstate.optimizers.quiet.
            quiet_dspy`; DSPy's logging switch and the standard streams are restored afterwards).

    Raises:
        ConfigError: an unknown optimizer, no metric callable, a missing valset, a zero budget, empty data,
            ``trainable`` patterns that match nothing, no LM configured (neither ``dspy.settings.lm`` nor an LM on
            every predictor), or a GEPA reflection LM that fails a probe call.
        OptimizationFailed: every LM call made while tuning failed (no server, a refused key, timeouts), or more
            than ``max_failed_share`` of the metric calls failed (all of them, or the optimizer's own), or the
            optimizer stopped on a failed LM call:
            the "optimized" program would be built from failures, so nothing is returned to save.
        CostCapReached: ``max_cost`` was reached before the optimizer returned a program (nothing to save).
    """
    if optimizer not in OPTIMIZERS:
        raise ConfigError(f"unknown optimizer '{optimizer}': use {', '.join(OPTIMIZERS)}")
    if not trainset:
        raise ConfigError("the training set is empty")
    if optimizer in NEEDS_VALSET and not valset:
        raise ConfigError(f"optimizer '{optimizer}' chooses among candidate programs and needs a validation set "
                          "(--val-data)")
    budget = budget or Budget()
    budget.check(optimizer)
    if trainable is not None:
        trainable_names(program, trainable)  # refuse patterns that match nothing before any LM call
    if not callable(metric):
        raise ConfigError("tune needs a metric callable (example, prediction, trace=None) -> float; for OffQuery "
                          "programs use groundstate.offquery_metric('t1+t2+t3')")
    if not 0.0 <= max_failed_share <= 1.0:
        raise ConfigError(f"max_failed_share must be between 0 and 1, got {max_failed_share}")
    _check_lm_configured(program)
    if max_cost is not None:  # before any call (the probe too): a spend that cannot be priced cannot be capped
        judge_lm = getattr(getattr(metric, "judge", None), "lm", None)
        check_priced(program_models(program, dspy.settings.lm) | {model_name(lm) for lm in (reflection_lm, judge_lm)
                                                                   if lm is not None})
    if optimizer == "gepa":
        flag = "--reflection-api-base" if reflection_lm is not None else "--api-base"
        reflection_lm = reflection_lm or dspy.settings.lm
        probe_lm(reflection_lm, "GEPA's reflection LM", flag)
    metric_fn = CountingMetric(metric, listener)
    feedback = CountingMetric(gepa_feedback_metric(feedback_metric or getattr(metric, "feedback", None) or metric),
                              listener)
    spec = getattr(metric, "spec", getattr(metric, "__name__", "custom"))
    counters = (metric_fn, feedback)
    started = time.perf_counter()
    before_hash = state_hash(program)
    stopped = None
    phase = getattr(listener, "on_phase", lambda text: None)
    with quiet_dspy(quiet), meter_context(cap_meter(new_meter(), max_cost)) as meter:
        meter.listener = listener if hasattr(listener, "on_lm_call") and hasattr(listener, "on_lm_usage") else None
        phase("scoring the starting program")
        scores = {"train": {"before": evaluate(program, trainset, metric_fn, threads, progress)}}
        if valset:
            scores["val"] = {"before": evaluate(program, valset, metric_fn, threads, progress)}
        _check_cost_cap(meter, optimizer, "scoring the starting program")
        _check_failed_share(meter, counters, optimizer, max_failed_share, "scoring the starting program")
        student = program.deepcopy()
        at_start = _failure_counts(meter, counters)
        freeze = frozen_except(student, trainable)
        phase("optimizing")
        try:
            optimized = _compile(optimizer, student, trainset, valset, metric_fn,
                                 feedback if optimizer == "gepa" else None, budget, reflection_lm, threads, seed)
        except Exception as exc:  # an optimizer that gives up on failing calls: say why, in one line
            _check_cost_cap(meter, optimizer, "optimizing (the optimizer gave up on the refused calls)")
            _check_some_call_worked(meter, optimizer, exc)
            if meter.failed and not isinstance(exc, GroundstateError):
                raise OptimizationFailed(f"optimization with '{optimizer}' stopped on a failed LM call "
                                         f"({_first_error(meter, exc)}); there is nothing to save") from exc
            raise
        finally:
            freeze.thaw()
        optimized = freeze.restore(optimized)
        _check_failed_share(meter, counters, optimizer, max_failed_share, "optimizing", since=at_start)
        _check_failed_share(meter, counters, optimizer, max_failed_share, "optimizing")
        if cap_reached(meter):  # keep what the optimizer did; scoring it would spend past the cap
            stopped = (f"stopped at the cost cap while optimizing with '{optimizer}': ${meter.spent_usd:.3g} spent, "
                       f"--max-cost ${max_cost:.3g}; the program keeps what the optimizer chose from the calls made "
                       "before the cap, and its scores after were not measured")
        else:
            phase("scoring the optimized program")
        for split, examples in (("train", trainset), ("val", valset)):
            if examples:
                scores[split]["after"] = None if stopped else evaluate(optimized, examples, metric_fn, threads,
                                                                       progress)
    _check_some_call_worked(meter, optimizer)
    share = _check_failed_share(meter, counters, optimizer, max_failed_share, "scoring the optimized program")
    unchanged = state_hash(optimized) == before_hash
    if unchanged:
        logger.warning("optimization with '%s' left the program unchanged (same instructions and demos)", optimizer)
    inp, out = meter.tokens()
    settings = {"optimizer": optimizer, "budget": asdict(budget), "metric": spec, "trainable": freeze.trainable,
                "seed": seed, "threads": threads}
    judge = getattr(metric_fn, "judge", None)
    if judge is not None:
        settings["judge"] = getattr(judge, "name", type(judge).__name__)
    if optimizer == "gepa":
        settings["reflection_lm"] = getattr(reflection_lm or dspy.settings.lm, "model", None)
    if max_cost is not None:
        settings["max_cost"] = max_cost
    return TuneResult(optimized, scores, meter.calls, inp, out, time.perf_counter() - started, settings,
                      unchanged=unchanged, failed_share=share, cost_usd=meter.cost_usd(), stopped_reason=stopped)


def _check_lm_configured(program: Any) -> None:
    """Raise :class:`ConfigError` when some predictor of ``program`` has no LM to call."""
    if dspy.settings.lm is not None:
        return
    try:
        missing = [name for name, p in program.named_predictors() if getattr(p, "lm", None) is None]
    except Exception:  # not a dspy.Module: let the optimizer say what is wrong
        return
    if missing:
        raise ConfigError("no LM is configured: call dspy.configure(lm=groundstate.get_lm('embedded')) (or any "
                          f"LiteLLM model) before tuning; predictor '{missing[0]}' has no LM of its own")


def probe_lm(lm: Any, what: str, flag: str = "--api-base") -> None:
    """One cheap call to ``lm``; raise :class:`ConfigError` (one line) when there is none or it fails, naming
    ``flag`` (the option that sets the LM's server) in the hint."""
    if lm is None:
        raise ConfigError(f"{what} is not configured: give one (--reflection-lm) or configure a default LM")
    try:
        lm("Reply with the word OK.", max_tokens=8)
    except Exception as exc:  # a refused key, no server, a timeout: before hours of optimization, not after
        from groundstate.lm.faults import lm_failure  # noqa: PLC0415 (--help stays light)

        raise ConfigError(f"{what} failed a probe call: {lm_failure(exc, lm, 'probe', flag)}") from None


def _first_error(meter: Any, exc: BaseException | None = None, counters: Sequence[CountingMetric] = ()) -> str:
    raised = next((c.first_error for c in counters if c.first_error), None)
    first = meter.first_error or raised or (f"{type(exc).__name__}: {exc}" if exc is not None else "unknown error")
    first = " ".join(scrub_secrets(first).split())
    return first if len(first) <= 200 else first[:197] + "..."


def _failure_counts(meter: Any, counters: Sequence[CountingMetric]) -> tuple[int, int]:
    """``(metric calls that worked, metric calls that failed)`` so far."""
    return sum(c.calls - c.raised for c in counters), meter.failed + sum(c.raised for c in counters)


def _check_failed_share(meter: Any, counters: Sequence[CountingMetric], optimizer: str, limit: float,
                        phase: str, since: tuple[int, int] | None = None) -> float:
    """The share of failed metric calls so far (or since the counts ``since``); raise :class:`OptimizationFailed`
    when it passes ``limit``.

    A metric call fails when the program call it scores failed on an LM call (the metric is then never called;
    each failed LM call ends one program call) or when the metric itself raised.
    """
    scored, failed = _failure_counts(meter, counters)
    if since is not None:
        scored, failed = scored - since[0], failed - since[1]
    total = scored + failed
    share = failed / total if total else 0.0
    if total and share > limit:
        raise OptimizationFailed(
            f"optimization with '{optimizer}' stopped while {phase}: {failed} of {total} "
            f"{'of its own ' if since is not None else ''}metric calls failed "
            f"({share:.0%} > --max-failed-share {limit:g}; first: {_first_error(meter, counters=counters)}); "
            "there is nothing to save. "
            + ("Check the LM with `groundstate lm check` (same --lm options)" if meter.failed
               else "Check the metric, which raised"))
    return share


def cap_reached(meter: Any) -> bool:
    """Whether ``meter``'s spending cap (:func:`~groundstate.metering.cap_meter`) is reached."""
    return meter.cap_usd is not None and meter.spent_usd >= meter.cap_usd


def _check_cost_cap(meter: Any, optimizer: str, phase: str) -> None:
    """Raise :class:`CostCapReached` (nothing to save) when the cap was reached while ``phase``."""
    if cap_reached(meter):
        raise CostCapReached(f"optimization with '{optimizer}' stopped at the cost cap while {phase}: "
                             f"${meter.spent_usd:.3g} spent, --max-cost ${meter.cap_usd:.3g}; there is nothing to "
                             "save; give a higher --max-cost")


def _check_some_call_worked(meter: Any, optimizer: str, exc: BaseException | None = None) -> None:
    """Raise :class:`OptimizationFailed` when LM calls were made and every one of them failed."""
    if meter.calls == 0 or meter.failed < meter.calls:
        return
    first = _first_error(meter, exc)
    raise OptimizationFailed(
        f"optimization with '{optimizer}' failed: all {meter.calls} LM calls failed (first: {first}); there is "
        "nothing to save. Check the LM with `groundstate lm check` (same --lm options)") from exc


def _compile(optimizer: str, student, trainset, valset, metric, feedback_metric, budget: Budget, reflection_lm,
             threads: int, seed: int):
    trainset, valset = list(trainset), list(valset or [])
    if optimizer == "bootstrap":
        opt = dspy.BootstrapFewShot(metric=metric, max_bootstrapped_demos=budget.max_bootstrapped_demos,
                                    max_labeled_demos=budget.max_labeled_demos, max_rounds=budget.max_rounds)
        return opt.compile(student, trainset=trainset)
    if optimizer == "random-search":
        opt = dspy.BootstrapFewShotWithRandomSearch(
            metric=metric, max_bootstrapped_demos=budget.max_bootstrapped_demos,
            max_labeled_demos=budget.max_labeled_demos, max_rounds=budget.max_rounds,
            num_candidate_programs=budget.num_candidate_programs, num_threads=threads)
        return opt.compile(student, trainset=trainset, valset=valset)
    if optimizer == "mipro":  # a preset chooses candidates and trials; explicit counts are passed otherwise
        counts = {} if budget.auto else {"num_candidates": budget.num_candidates}
        opt = dspy.MIPROv2(metric=metric, auto=budget.auto, **counts,
                           max_bootstrapped_demos=budget.max_bootstrapped_demos,
                           max_labeled_demos=budget.max_labeled_demos, num_threads=threads, seed=seed,
                           verbose=False)
        trials = {} if budget.auto else {"num_trials": budget.num_trials}
        return opt.compile(student, trainset=trainset, valset=valset, **trials,
                           minibatch=len(valset) > 25, minibatch_size=min(25, len(valset)))
    opt = dspy.GEPA(metric=feedback_metric, max_metric_calls=budget.max_metric_calls, reflection_lm=reflection_lm,
                    num_threads=threads, seed=seed, track_stats=False, use_merge=False)
    return opt.compile(student, trainset=trainset, valset=valset)
