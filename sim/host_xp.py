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
bools for the per-step path itself.

**AVX-512.** On an Intel Xeon with AVX-512 (Sapphire Rapids), numpy's 512-bit kernels for
``maximum``, ``minimum`` (and so ``clip``) and the transcendental functions (``exp``, ``tanh``,
``tan``, ``arctan``, ``arctan2``, measured) slow the code that runs after them: a MuJoCo step called
next takes 7-10 % longer, whatever the array's size (docs/backends.md, "AVX-512 and the engine").
Comparisons, ``where``, arithmetic, ``sqrt``, ``sin`` and ``cos`` do not. So here ``clip``,
``maximum`` and ``minimum`` are comparisons and ``where``, with numpy's values bit for bit (NaN
propagating, a signed zero as numpy returns it), and the transcendental functions of a float64
array of up to :data:`SMALL` values (one world's) are Python's ``math`` ones, value by value:
within two ulps of numpy's own (its SIMD tanh is that far from the correctly rounded value), whose
SIMD paths already differ from one CPU to another. Inside this module ``any``, ``all``, ``sum``,
``max``, ``min``, ``abs``, ``round``, ``bool`` and ``pow`` are numpy's: Python's are ``builtins.``'s.
"""

from __future__ import annotations

import builtins
import math
import types
from typing import Any

import numpy as np

globals().update({name: getattr(np, name) for name in np.__all__})

_sqrt, _multiply, _where, _isnan, _logical_or = np.sqrt, np.multiply, np.where, np.isnan, np.logical_or
_less, _greater, _less_equal, _greater_equal = np.less, np.greater, np.less_equal, np.greater_equal
# Typed Any: numpy's stubs overload reduce on literal keepdims, which these pass through.
_add_reduce: Any = np.add.reduce
_and_reduce: Any = np.logical_and.reduce
_or_reduce: Any = np.logical_or.reduce


def clip(x: Any, /, min: Any = None, max: Any = None) -> Any:
    """``np.clip`` for bounds that are not NaN: the values of ``minimum(maximum(x, min), max)``, a
    NaN in ``x`` propagating and a bound equal to ``x`` returned (so a signed zero as numpy's
    ``maximum`` and ``minimum`` give it), by comparisons and ``where`` (see the module's note on
    AVX-512)."""
    if min is None and max is None:
        return np.array(x, copy=True)
    if min is not None:
        x = _where(_less_equal(x, min), min, x)
    return x if max is None else _where(_greater_equal(x, max), max, x)


def maximum(x1: Any, x2: Any, /) -> Any:
    """``np.maximum``'s values (a NaN in either wins; of two equal values, ``x2``) by comparisons."""
    return _where(_logical_or(_greater(x1, x2), _isnan(x1)), x1, x2)


def minimum(x1: Any, x2: Any, /) -> Any:
    """``np.minimum``'s values (a NaN in either wins; of two equal values, ``x2``) by comparisons."""
    return _where(_logical_or(_less(x1, x2), _isnan(x1)), x1, x2)


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


def _one_world(math_fn: Any, numpy_fn: Any) -> Any:
    """``numpy_fn`` computed by ``math_fn`` value by value for a float64 array of up to
    :data:`SMALL` values (see the module's note on AVX-512); anything else, or a value ``math``
    refuses (an overflow, the tangent of infinity), goes to numpy."""

    def fn(x: Any, /, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs or not isinstance(x, np.ndarray) or x.dtype != _F64 or x.size > SMALL:
            return numpy_fn(x, *args, **kwargs)
        try:
            values = list(map(math_fn, x.ravel().tolist()))
        except (OverflowError, ValueError):
            return numpy_fn(x)
        return np.array(values, dtype=_F64).reshape(x.shape)

    fn.__name__ = fn.__qualname__ = numpy_fn.__name__
    fn.__doc__ = f"``np.{numpy_fn.__name__}``; one world's float64 values by ``math.{math_fn.__name__}``."
    return fn


def _arctan2(x1: Any, x2: Any, /, *args: Any, **kwargs: Any) -> Any:
    """``np.arctan2``; two float64 arrays of one shape and up to :data:`SMALL` values by ``math.atan2``."""
    if (
        args
        or kwargs
        or not isinstance(x1, np.ndarray)
        or not isinstance(x2, np.ndarray)
        or x1.dtype != _F64
        or x2.dtype != _F64
        or x1.shape != x2.shape
        or x1.size > SMALL
    ):
        return np.arctan2(x1, x2, *args, **kwargs)
    values = list(map(math.atan2, x1.ravel().tolist(), x2.ravel().tolist()))
    return np.array(values, dtype=_F64).reshape(x1.shape)


_F64 = np.dtype(np.float64)
exp = _one_world(math.exp, np.exp)
tanh = _one_world(math.tanh, np.tanh)
tan = _one_world(math.tan, np.tan)
arctan = atan = _one_world(math.atan, np.arctan)
arctan2 = atan2 = _arctan2


def any_true(x: Any, /) -> bool:
    """Whether any value of a boolean numpy array is true."""
    if x.size <= SMALL:
        return True in x.ravel().tolist()
    return builtins.bool(_or_reduce(x, axis=None))
