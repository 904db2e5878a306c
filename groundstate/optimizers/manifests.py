"""The pydantic models of saved-artifact manifests, one per artifact kind, checked when a manifest is read.

Every saved artifact has ``manifest.json`` (see :mod:`groundstate.optimizers.artifacts`). Its common part
(:class:`Manifest`: ``format``, ``kind``, ``versions``) is checked by
:func:`~groundstate.optimizers.artifacts.read_manifest`; the part of each kind (:class:`ProgramManifest`,
:class:`SklearnManifest`, :class:`ParamsManifest`) once the kind and the versions are known to be ones this
version reads, before anything is built. A field of the wrong type or a missing one is one line naming the file
and the field (:func:`groundstate.schema.validate`).

The models check the manifest's *structure*; what a saved class name may be and which arguments it takes are
checked by :mod:`groundstate.registry` (its errors say "refusing to load class ..."), so the class name and the
keyword arguments are left to it here. Every model allows fields it does not know: manifests carry descriptive
extras (``purpose``, ``data``, ``scores``...) that loading does not read, and commands add their own (the
``task``/``build_args`` of ``groundstate optimize``, checked by the evaluator that reads them).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, RootModel, StrictInt, StrictStr


class ClassEntry(BaseModel):
    """``{"class": ..., "kwargs": {...}}``: a saved class and the arguments it was built with. The name and the
    arguments are checked by the registry (which refuses anything it does not list), not here."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    class_name: Any = Field(alias="class")
    kwargs: Any = None


class Versions(RootModel[dict[str, StrictStr]]):
    """``package -> version`` of the libraries an artifact was saved with."""


class Manifest(BaseModel):
    """What every artifact manifest holds: the artifact ``format``, its ``kind`` and the library versions it was
    saved with (``package -> version``)."""

    model_config = ConfigDict(extra="allow")

    format: StrictInt
    kind: StrictStr
    versions: dict[str, StrictStr] = Field(default_factory=dict)


class ProgramManifest(Manifest):
    """A saved DSPy program: its class with its build arguments, and its module tree (checked entry by entry
    when the tree is rebuilt, :mod:`groundstate.optimizers.program_tree`)."""

    program: ClassEntry
    modules: dict[str, Any] | None = None


class SklearnManifest(Manifest):
    """A saved scikit-learn estimator; ``features`` and ``actions`` name the inputs and outputs of a controller."""

    estimator: ClassEntry | None = None
    features: list[StrictStr] | None = None
    actions: list[StrictStr] | None = None


class ParamsManifest(Manifest):
    """A saved parameter object (the conformal calibrator): its class, and the configuration it was fitted for."""

    object: ClassEntry
    configuration: dict[str, Any] | None = None


#: The model of each artifact kind.
MODELS: dict[str, type[Manifest]] = {"dspy-program": ProgramManifest, "sklearn": SklearnManifest,
                                     "params": ParamsManifest}
