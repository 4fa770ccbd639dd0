"""numpy without its Python-level wrappers: the array namespace of the per-step path on the host.

Task terms compute with ``env.xp`` (:mod:`robolearn.tasks.worlds`): torch on a device backend,
this module on the host; the safety layer (:mod:`robolearn.hardware.safety`) computes with it too.
It is numpy (every public name of numpy is here as it is), except for the few functions called
every step whose numpy implementations are Python functions around a ufunc or a method: ``clip``,
``sum``, ``all``, ``any``, ``reshape``, ``array_equal``, ``astype``, ``zeros_like`` and
``linalg.vector_norm``. On the one-world path, where arrays hold a handful of numbers, those
wrappers cost two to four times the ufunc itself (issue 18: ``clip`` about 2.2 us against 0.6 us).
Here they call the ufuncs (or methods) directly, with the same arguments' meaning and bit-identical
results (tests/test_equivalence.py holds every task to that, tests/test_host_xp.py each function to
numpy's). Two checks that are not numpy's, :func:`all_finite` and :func:`any_true`, return Python
bools for the per-step path itself. Inside this module ``any``, ``all``, ``sum``, ``max``, ``min``,
``abs``, ``round``, ``bool`` and ``pow`` are numpy's: Python's are ``builtins.``'s.
"""

from __future__ import annotations

import builtins
import math
import types
from typing import Any

import numpy as np

globals().update({name: getattr(np, name) for name in np.__all__})

_maximum, _minimum, _sqrt, _multiply = np.maximum, np.minimum, np.sqrt, np.multiply
# Typed Any: numpy's stubs overload reduce on literal keepdims, which these pass through.
_add_reduce: Any = np.add.reduce
_and_reduce: Any = np.logical_and.reduce
_or_reduce: Any = np.logical_or.reduce


def clip(x: Any, /, min: Any = None, max: Any = None) -> Any:
    """``np.clip`` as ``minimum(maximum(x, min), max)``: the same values, NaN propagating alike."""
    if min is None and max is None:
        return np.array(x, copy=True)
    if min is not None:
        x = _maximum(x, min)
    return x if max is None else _minimum(x, max)


def sum(x: Any, /, *, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    """``np.sum``: numpy's own sum is this reduction behind argument handling."""
    return _add_reduce(x, axis=axis, dtype=dtype, keepdims=keepdims)


def all(x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return _and_reduce(x, axis=axis, keepdims=keepdims)


def any(x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return _or_reduce(x, axis=axis, keepdims=keepdims)


def reshape(x: Any, /, shape: Any, *, copy: bool | None = None) -> Any:
    """``np.reshape``: an ndarray's own method (a view where numpy's function makes one too)."""
    if copy is None and isinstance(x, np.ndarray):
        return x.reshape(shape)
    return np.reshape(x, shape, copy=copy)


def astype(x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Any:
    """``np.astype``: an ndarray's own method (1.4 us against 0.25 on one value)."""
    if isinstance(x, np.ndarray) and device is None:
        return x.astype(dtype, copy=copy)
    return np.astype(x, dtype, copy=copy, device=device)


def zeros_like(x: Any, /, dtype: Any = None, **kwargs: Any) -> Any:
    """``np.zeros_like``: zeros of a C-contiguous ndarray's shape and type made directly (0.4 us
    against 1.0); anything else (other layouts, subclasses, options) goes to numpy."""
    if not kwargs and type(x) is np.ndarray and x.flags.c_contiguous:
        return np.zeros(x.shape, dtype=x.dtype if dtype is None else dtype)
    return np.zeros_like(x, dtype=dtype, **kwargs)


def array_equal(a: Any, b: Any, /) -> bool:
    """``np.array_equal`` for two arrays: the same shape and equal elements (NaN equals nothing)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(_and_reduce(np.equal(a, b), axis=None))


def _vector_norm(x: Any, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Any:
    """The Euclidean norm over one axis of a real float array as numpy computes it
    (``sqrt(add.reduce(x * x))``, numpy's special case for speed); anything else goes to numpy."""
    if ord == 2 and isinstance(axis, int) and isinstance(x, np.ndarray) and x.dtype.kind == "f":
        return _sqrt(_add_reduce(_multiply(x, x), axis=axis, keepdims=keepdims))
    return np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)


linalg = types.SimpleNamespace(**{k: getattr(np.linalg, k) for k in np.linalg.__all__})
linalg.vector_norm = _vector_norm

# -- checks of the per-step path that are not numpy's functions ------------------------------------
SMALL = 64
"""Values up to which :func:`all_finite` and :func:`any_true` read an array as Python numbers: a
numpy reduction over a handful of values costs about 2 us of call overhead, ``tolist`` and a
C-level ``map`` about 0.5 (issue 18: one world's action, flags, a safety command)."""


def all_finite(x: Any, /) -> bool:
    """Whether every value of a numpy array is finite (exactly: no sum that could overflow)."""
    if x.size <= SMALL:  # builtins.all: this module's all is numpy's
        return builtins.all(map(math.isfinite, x.ravel().tolist()))
    return builtins.bool(_and_reduce(np.isfinite(x), axis=None))  # this module's bool is numpy's


def any_true(x: Any, /) -> bool:
    """Whether any value of a boolean numpy array is true."""
    if x.size <= SMALL:
        return True in x.ravel().tolist()
    return builtins.bool(_or_reduce(x, axis=None))
