"""A factory of scripted LMs for experiment cells: every cell gets the same counting scripted LM, named as the
embedded model so the JSON adapter is used, as for the embedded LM."""


class ScriptedLMs:
    """``(cell) -> (lm, LMConfig)`` for :func:`plan_experiment` / :func:`run_experiment` / :func:`build_table`; the
    engine counts every request (``calls``)."""

    def __init__(self, temperature: float = 0.0, fail=None, model: str | None = None):
        import dspy

        from groundstate.lm.embedded import EMBEDDED_MODEL_NAME
        from groundstate.testing import AsyncScriptedEngine, ScriptedEngine

        self.engine = ScriptedEngine(fail, input_tokens=None, output_tokens=None)
        self.lm = dspy.LM(model or EMBEDDED_MODEL_NAME, engine=self.engine,
                          async_engine=AsyncScriptedEngine(self.engine), cache=False, temperature=temperature,
                          max_tokens=512)

    @property
    def calls(self) -> int:
        return self.engine.calls

    def __call__(self, cell):
        from groundstate.lm.config import LMConfig

        return self.lm, LMConfig()
