"""The counter-based random streams of the simulated agents, in Python integers and, bit for bit, as arrays.

A stream is a 64-bit key made by :func:`mix` (SplitMix64 over the parts that name a draw: seed, task, agent,
transcript length, ...); its ``j``-th uniform number is :func:`uniform` and its standard normals are
:func:`normals` (Box-Muller). There is no global random state, so a draw depends only on what names it.

:func:`mix_rows` and :func:`normal_rows` compute the same keys and numbers for many streams at once (one per
agent of a group): the hashing as ``uint64`` arrays (the same integer arithmetic modulo 2**64), the
logarithms, cosines and sines with :mod:`math` (NumPy's may differ in the last bit) and the rest as arrays in
the order :func:`normals` uses, so each row is exactly ``normals(key, n)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["MASK", "mix", "mix_rows", "normal_rows", "normals", "splitmix", "uniform"]


MASK = (1 << 64) - 1


_TWO_53 = float(1 << 53)


_START = 0x243F6A8885A308D3


_GAMMA, _M1, _M2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def splitmix(x: int) -> int:
    """The SplitMix64 finaliser of ``x + gamma`` (64-bit)."""
    x = (x + _GAMMA) & MASK
    x = ((x ^ (x >> 30)) * _M1) & MASK
    x = ((x ^ (x >> 27)) * _M2) & MASK
    return x ^ (x >> 31)


def mix(*parts: int) -> int:
    """The stream key of ``parts`` (each taken modulo 2**64)."""
    h = _START
    for part in parts:
        h = splitmix(h ^ (part & MASK))
    return h


def uniform(key: int, j: int) -> float:
    """The ``j``-th uniform number in (0, 1) of the stream ``key``."""
    return ((splitmix((key + j) & MASK) >> 11) + 0.5) / _TWO_53


def normals(key: int, n: int) -> list[float]:
    """``n`` standard normal numbers from the stream ``key`` (Box-Muller)."""
    out: list[float] = []
    j = 0
    while len(out) < n:
        r = math.sqrt(-2.0 * math.log(uniform(key, j)))
        theta = 2.0 * math.pi * uniform(key, j + 1)
        out.append(r * math.cos(theta))
        out.append(r * math.sin(theta))
        j += 2
    return out[:n]


_G, _A, _B = np.uint64(_GAMMA), np.uint64(_M1), np.uint64(_M2)


_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def _splitmix_array(x: np.ndarray) -> np.ndarray:
    """:func:`splitmix` of every element of a ``uint64`` array, in place (unsigned arithmetic wraps modulo
    2**64)."""
    x += _G
    x ^= x >> _S30
    x *= _A
    x ^= x >> _S27
    x *= _B
    x ^= x >> _S31
    return x


def _common(part: int | Sequence[int]) -> int | None:
    """The part's value when it is the same for every row (one integer, or a sequence of equal ones)."""
    if isinstance(part, int):
        return part
    return part[0] if len(set(part)) == 1 else None


def mix_rows(*parts: int | Sequence[int]) -> np.ndarray:
    """``[mix(*row) for row in rows]`` as a ``uint64`` array: each part is one integer for every row or one
    integer per row (at least one part must be per row). The leading parts common to every row are hashed
    once, as Python integers, the rest as arrays."""
    size = max(len(p) for p in parts if not isinstance(p, int))
    h, rest = _START, list(parts)
    while len(rest) > 1 and _common(rest[0]) is not None:
        h = splitmix(h ^ (_common(rest.pop(0)) & MASK))
    out = np.full(size, h, dtype=np.uint64)
    for part in rest:
        out ^= np.uint64(part & MASK) if isinstance(part, int) else np.array([p & MASK for p in part],
                                                                             dtype=np.uint64)
        _splitmix_array(out)
    return out


def normal_rows(keys: np.ndarray, n: int) -> np.ndarray:
    """``np.array([normals(key, n) for key in keys])`` for a ``uint64`` array of stream keys, the same numbers."""
    pairs = (n + 1) // 2
    bits = _splitmix_array(keys[:, None] + np.arange(2 * pairs, dtype=np.uint64))
    u = ((bits >> np.uint64(11)).astype(float) + 0.5) / _TWO_53
    logs = np.array(list(map(math.log, u[:, 0::2].ravel().tolist())))
    theta = ((2.0 * math.pi) * u[:, 1::2]).ravel().tolist()
    r = np.sqrt(-2.0 * logs)
    out = np.empty((len(keys), 2 * pairs))
    out[:, 0::2] = (r * np.array(list(map(math.cos, theta)))).reshape(len(keys), pairs)
    out[:, 1::2] = (r * np.array(list(map(math.sin, theta)))).reshape(len(keys), pairs)
    return out[:, :n]
