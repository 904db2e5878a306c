"""DSPy signatures only, one file per family. The docstring of each signature is its instruction."""
