"""One local Ray (2 CPUs) for every Ray test module of the session, started only when one asks for it.

``local_ray`` (module-scoped) also registers the asking module, :mod:`tests.helpers` and the modules a test module
lists in ``PICKLE_BY_VALUE`` to travel by value, so Ray workers need not import the tests package.
"""

import sys

import pytest


@pytest.fixture(scope="session")
def ray_session():
    ray = pytest.importorskip("ray")
    pytest.importorskip("cloudpickle")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}})
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def local_ray(request, ray_session):
    import cloudpickle

    import tests.helpers as helpers

    modules = [sys.modules[request.module.__name__], helpers, *getattr(request.module, "PICKLE_BY_VALUE", ())]
    for module in modules:
        cloudpickle.register_pickle_by_value(module)
    yield ray_session
    for module in modules:
        cloudpickle.unregister_pickle_by_value(module)
