"""The DHD steps as registered tasks: ``dhd-generate``, ``dhd-replay`` and ``dhd-mask``.

Each task turns its typed settings (:mod:`groundstate.eval.dhd.settings`) into the planned run of
:mod:`groundstate.eval.dhd.run` (so the command line, Python callers and experiment specs assemble a DHD step the
same way): the problems or the cache, the DHD program and its evaluator (:func:`dhd_program`), and the step's run.

Predictor names for ``--lm-config`` roles: ``recruiter.recruit``, ``hypothesizer.propose``,
``integrator.integrate``, ``solver.solve`` and ``judge`` (the evaluator's LM judge). A ``judge_lm`` setting is
the role ``judge`` of a copy of the LM configuration (the caller's configuration is never changed).
"""

from __future__ import annotations

from typing import Any

from groundstate.errors import ConfigError
from groundstate.eval.benchmarks.problems import load_problems
from groundstate.eval.dhd.cache import MessageCache
from groundstate.eval.dhd.mask_sample import default_labels_path, load_repeated_labels, resolve_quotas
from groundstate.eval.dhd.run import plan_generate, plan_mask, plan_replay
from groundstate.eval.dhd.settings import EvaluatorSettings, GenerateSettings, MaskSettings, ReplaySettings
from groundstate.eval.run_settings import RunSettings
from groundstate.eval.task import PlannedRun, RunContext, Task
from groundstate.lm.config import LMConfig
from groundstate.lm.specs import describe_lm, is_embedded
from groundstate.programs.dhd import deliberation
from groundstate.programs.dhd.evaluator import AnswerEvaluator


def dhd_program(settings: EvaluatorSettings, lm: Any, lm_config: Any, *, k: int = 5, call_threads: int = 8
                ) -> tuple[Any, Any, bool]:
    """``(program, evaluator, vary_seed)``: the DHD program and answer evaluator ``settings`` describe, with the
    LMs of ``lm_config``'s roles applied (``settings.judge_lm``, if given, as the role ``judge`` of a copy, served
    by ``settings.judge_api_base``, else where :meth:`~groundstate.lm.config.LMConfig.server_for` says: the default
    LM's server for a judge of its provider, the provider's endpoint otherwise)."""
    mode = settings.evaluator_mode()
    choice = getattr(settings, "vary_seed", "auto")
    vary_seed = is_embedded(lm) if choice == "auto" else choice == "on"
    program = deliberation.DiverseHypothesisDeliberation(
        k=k, vary_seed=vary_seed, max_workers=call_threads,
        integrator_temperature=getattr(settings, "integrator_temperature",
                                       deliberation.DEFAULT_INTEGRATOR_TEMPERATURE),
        recruiter_temperature=getattr(settings, "recruiter_temperature", deliberation.DEFAULT_RECRUITER_TEMPERATURE),
        hypothesizer_temperature=getattr(settings, "hypothesizer_temperature",
                                         deliberation.DEFAULT_HYPOTHESIZER_TEMPERATURE),
        integrator_prompt=getattr(settings, "integrator_prompt", deliberation.DEFAULT_PROMPT),
        integrator_max_tokens=getattr(settings, "integrator_max_tokens", None),
        confidence=getattr(settings, "confidence", deliberation.DEFAULT_CONFIDENCE))
    evaluator = AnswerEvaluator(mode=mode, temperature=settings.judge_temperature)
    if settings.judge_lm:
        if "judge" in lm_config.roles and getattr(settings, "judge_api_base", None):
            raise ConfigError("the judge is set twice (--judge-lm/--judge-api-base and the --lm-config role "
                              "'judge'): give it in one place")
        server = lm_config.server_for(settings.judge_lm, getattr(settings, "judge_api_base", None))
        lm_config = LMConfig(default=lm_config.default, roles={"judge": {"model": settings.judge_lm, **server},
                                                               **lm_config.roles}, source=lm_config.source)
    lm_config.apply(program)
    lm_config.apply(evaluator)
    return program, evaluator, vary_seed


def cache_k(cache: MessageCache) -> int:
    """The cache's pool size: its recorded ``k``, else its largest pool, else 5."""
    k = cache.meta().get("k")
    if isinstance(k, int) and not isinstance(k, bool) and k > 0:
        return k
    sizes = [len(entry.pool()) for entry in cache.entries().values()]
    return max(sizes) if sizes and max(sizes) > 0 else 5


def _lm(context: RunContext) -> tuple[Any, Any, dict[str, Any]]:
    lm, lm_config = context.lm_pair()
    return lm, lm_config, describe_lm(lm)


class GenerateTask(Task):
    """``dhd generate``: recruit roles and cache one message per role for each problem not cached yet. With every
    problem cached already, the plan has nothing to run (its ``outcome`` holds the counts)."""

    name, settings = "dhd-generate", GenerateSettings
    help = "recruit roles and cache one message per role for each problem"

    def plan(self, settings: GenerateSettings, context: RunContext, *, run: RunSettings | None = None,
             program: Any = None, source: Any = None) -> PlannedRun:
        run = run or RunSettings()
        skipped: list[str] = []
        problems = load_problems(source if source is not None else settings.data, settings.format,
                                 skip_invalid=settings.skip_invalid, problems=skipped)
        for line in skipped:
            context.tell(f"skipped: {line}")
        if not problems:
            raise ConfigError(f"no usable problems in {settings.data}")
        lm, lm_config, described = _lm(context)
        built, evaluator, _ = dhd_program(settings, lm, lm_config, k=settings.k, call_threads=run.call_threads)
        return plan_generate(MessageCache(settings.cache), problems, program=program or built, evaluator=evaluator,
                             k=settings.k, call_threads=run.call_threads, lm=described, source=settings.data)


class ReplayTask(Task):
    """``dhd replay``: replay the integrator with the cached messages hidden (loo) or alone (single); the run's
    ``outcome`` is ``{K: problems left out for having fewer than K usable messages}``."""

    name, settings = "dhd-replay", ReplaySettings
    help = "replay the integrator with messages hidden (loo) or alone (single)"

    def plan(self, settings: ReplaySettings, context: RunContext, *, run: RunSettings | None = None,
             program: Any = None, source: Any = None) -> PlannedRun:
        run = run or RunSettings()
        cache = MessageCache(settings.cache)
        cache.require()
        k = cache_k(cache)
        ks = settings.k or (list(range(1, k + 1)) if settings.mode == "loo" else [k])
        lm, lm_config, described = _lm(context)
        built, evaluator, vary_seed = dhd_program(settings, lm, lm_config, call_threads=run.call_threads)
        return plan_replay(cache, settings.mode, ks, settings.repeats, program=program or built, evaluator=evaluator,
                           call_threads=run.call_threads, lm=described, temperature=settings.integrator_temperature,
                           vary_seed=vary_seed)


class MaskTask(Task):
    """``dhd mask``: component masking on a sample of messages labelled by repeated LOO replay; the run's
    ``outcome`` is ``(table, sample document, labels)``."""

    name, settings = "dhd-mask", MaskSettings
    help = "component masking (the paper's Table 23) on messages labelled by repeated LOO replay"

    def plan(self, settings: MaskSettings, context: RunContext, *, run: RunSettings | None = None,
             program: Any = None, source: Any = None) -> PlannedRun:
        run = run or RunSettings()
        cache = MessageCache(settings.cache)
        cache.require()
        resolve_quotas(settings.per_category, settings.sample, {})  # bad sizes stop here, before anything is loaded
        # the labels are checked before any LM is set up: without repeated-replay labels nothing starts
        labels = load_repeated_labels(settings.labels or default_labels_path(cache.dir), k=settings.k,
                                      cache_dir=cache.dir)
        lm, lm_config, described = _lm(context)
        built, evaluator, vary_seed = dhd_program(settings, lm, lm_config, call_threads=run.call_threads)
        planned = plan_mask(cache, settings.repeats, per_category=settings.per_category,
                            sample_size=settings.sample, labels=labels, seed=settings.seed,
                            one_per_problem=not settings.same_problem, program=program or built, evaluator=evaluator,
                            call_threads=run.call_threads, lm=described, temperature=settings.integrator_temperature,
                            vary_seed=vary_seed)
        tabulate = planned.after
        planned.after = lambda result: (*tabulate(result), labels)
        return planned


#: The DHD steps by task name.
DHD_TASKS: dict[str, Task] = {task.name: task for task in (GenerateTask(), ReplayTask(), MaskTask())}
