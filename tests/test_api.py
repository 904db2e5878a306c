import groundstate


def test_every_public_name_resolves():
    names = [n for n in groundstate.__all__ if n != "__version__"]
    assert "Runner" in names and "get_lm" in names
    for name in names:
        assert getattr(groundstate, name) is not None, name
