"""One world's terms as straight-line Python on floats (issue 18: the per-step path).

On one world every array a term computes with holds a handful of numbers, and numpy spends
0.3-2 us of call overhead on each operation for a few nanoseconds of arithmetic: pick-cube's terms
made about 60 numpy calls a step, most of the Python between two engine calls. So on one world on
the host, :class:`~robolearn.tasks.worlds.TaskWorlds` runs each group of terms once on symbolic
arrays (numpy object arrays whose elements record what is done to them), and compiles what they
recorded into one Python function on floats: the action's bounds, the action term
(``to_controls``), the step's terms (updates, success, terminations, rewards and the step's ends)
and the observation's; ``policy_node``'s view of a robot compiles its observation the same way
(:class:`CompiledGroups` runs them). The recorded function reads the same backend arrays, task
state and counters (each with one ``tolist``; a backend's live views directly), does the same IEEE
operations in the same order (numpy's pairwise order for sums; ``clip``, ``maximum`` and
``minimum`` by comparisons, as :mod:`robolearn.sim.host_xp` computes them; ``env.xp``'s
transcendental functions by Python's ``math`` where ``host_xp`` uses it, numpy's own functions by
numpy), and returns Python numbers. tests/test_one_world.py holds each operation and every task's
trajectory to the array path's, tests/test_equivalence.py every task to its recordings.

A group the recorder cannot follow is never compiled; it keeps the array path, with the same
results. That is a term that branches on a value (``if``, ``bool()``), draws random numbers, calls a
backend method that does not read state, writes to what it reads (the backend's arrays, the
action, the counters), computes in float32, or calls a numpy function outside the recorder's list
(:data:`_ARRAY_FUNCTIONS`, :data:`_ELEMENTWISE` and :class:`_RecordingXp`). A term's value must
depend only on what it reads through ``env`` and its parameters, the contract of every term: a task
with terms that keep their own state (classes with ``reset``) is never compiled. A group whose
compiled code would not be faster (:attr:`Program.faster_than_arrays`) stays on arrays too.
"""

from __future__ import annotations

import collections
import functools
import itertools
import logging
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robolearn.sim import host_xp

log = logging.getLogger(__name__)


class Untraceable(Exception):
    """A term did something the recorder cannot turn into straight-line code."""


class StaleProgram(Exception):
    """An array a compiled group reads changed its size: the array path takes over."""


# -- the recording ------------------------------------------------------------------------------
@dataclass
class _Recording:
    """The statements recorded so far: one assignment per operation, in the order they ran."""

    lines: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)
    """(variable, expression, the variables and leaves it reads)."""
    count: int = 0
    array_ops: int = 0
    """Operations on recorded arrays: each one numpy call of the array path."""

    def op(self, kind: str, code: str, deps: Iterable[str]) -> Sym:
        name = f"v{self.count}"
        self.count += 1
        self.lines.append((name, code, tuple(deps)))
        return Sym(self, name, kind, (name,))


class Sym:
    """One recorded scalar: the code that names it (a variable, a leaf's element or a literal),
    its kind as numpy would type it (``f`` float64, ``i`` int64, ``b`` bool) and what it reads."""

    __slots__ = ("code", "deps", "kind", "rec")

    def __init__(self, rec: _Recording, code: str, kind: str, deps: tuple[str, ...]) -> None:
        self.rec, self.code, self.kind, self.deps = rec, code, kind, deps

    def _refuse(self, *_: Any) -> Any:
        raise Untraceable("a term turns a value into a Python number (a branch or a conversion)")

    __bool__ = __float__ = __int__ = __index__ = __complex__ = _refuse
    __hash__ = object.__hash__

    def __add__(self, other: Any) -> Any:
        return _binary("+", self, other)

    def __radd__(self, other: Any) -> Any:
        return _binary("+", other, self)

    def __sub__(self, other: Any) -> Any:
        return _binary("-", self, other)

    def __rsub__(self, other: Any) -> Any:
        return _binary("-", other, self)

    def __mul__(self, other: Any) -> Any:
        return _binary("*", self, other)

    def __rmul__(self, other: Any) -> Any:
        return _binary("*", other, self)

    def __truediv__(self, other: Any) -> Any:
        return _divide(self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return _divide(other, self)

    def __pow__(self, other: Any) -> Any:
        return _power(self, other)

    def __mod__(self, other: Any) -> Any:
        return _remainder(self, other)

    def __rmod__(self, other: Any) -> Any:
        return _remainder(other, self)

    def __neg__(self) -> Any:
        return _negative(self)

    def __abs__(self) -> Any:
        return _absolute(self)

    def __invert__(self) -> Any:
        return _invert(self)

    def __and__(self, other: Any) -> Any:
        return _logical("&", self, other)

    __rand__ = __and__

    def __or__(self, other: Any) -> Any:
        return _logical("|", self, other)

    __ror__ = __or__

    def __xor__(self, other: Any) -> Any:
        return _logical("^", self, other)

    __rxor__ = __xor__

    def __lt__(self, other: Any) -> Any:
        return _compare("<", self, other)

    def __le__(self, other: Any) -> Any:
        return _compare("<=", self, other)

    def __gt__(self, other: Any) -> Any:
        return _compare(">", self, other)

    def __ge__(self, other: Any) -> Any:
        return _compare(">=", self, other)

    def __eq__(self, other: Any) -> Any:
        return _compare("==", self, other)

    def __ne__(self, other: Any) -> Any:
        return _compare("!=", self, other)


_INF_CODE = {math.inf: "_INF", -math.inf: "(-_INF)"}


def _python(x: Any) -> Any:
    """A constant as a Python number of numpy's kind, float32 and other widths refused."""
    if type(x) in (bool, int, float):  # exactly: np.float64 is a float, and its repr is not code
        return x
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.float64):
        return float(x)
    raise Untraceable(f"a term computes with {type(x).__name__}, not float64, int64 or bool")


def _kind(x: Any) -> str:
    if isinstance(x, Sym):
        return x.kind
    x = _python(x)
    return "b" if isinstance(x, bool) else "i" if isinstance(x, int) else "f"


def _code(x: Any) -> tuple[str, tuple[str, ...]]:
    """An operand's code and what it reads."""
    if isinstance(x, Sym):
        return x.code, x.deps
    x = _python(x)
    if isinstance(x, float) and not math.isfinite(x):
        return ("_NAN" if math.isnan(x) else _INF_CODE[x]), ()
    return (f"({x!r})" if (isinstance(x, float | int) and not isinstance(x, bool) and x < 0) else repr(x)), ()


def _rec(*xs: Any) -> _Recording | None:
    for x in xs:
        if isinstance(x, Sym):
            return x.rec
    return None


def _emit(kind: str, template: str, *xs: Any) -> Any:
    """Record ``template`` filled with the operands' code; constants only are folded by numpy."""
    rec = _rec(*xs)
    if rec is None:  # every operand is a constant: the caller folds it, a bug if not
        raise AssertionError("constant operands reach _emit")
    codes = [_code(x) for x in xs]
    deps = tuple(itertools.chain.from_iterable(d for _, d in codes))
    return rec.op(kind, template.format(*(c for c, _ in codes)), deps)


def _fold(ufunc: Any, *xs: Any) -> Any:
    """numpy's own result on constants, as a Python number."""
    args = [np.float64(x) if isinstance(x, float) else x for x in map(_python, xs)]
    with np.errstate(all="ignore"):
        return _python(ufunc(*args))


_ARITH_UFUNC = {"+": np.add, "-": np.subtract, "*": np.multiply}


def _binary(op: str, a: Any, b: Any) -> Any:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return NotImplemented
    if not isinstance(a, Sym) and not isinstance(b, Sym):
        return _fold(_ARITH_UFUNC[op], a, b)
    ka, kb = _kind(a), _kind(b)
    if ka == "b" and kb == "b":
        raise Untraceable("numpy's arithmetic on two booleans is logical, not Python's")
    if op == "-" and "b" in (ka, kb):
        raise Untraceable("numpy refuses to subtract booleans")
    kind = "f" if "f" in (ka, kb) else "i"
    return _emit(kind, "({} " + op + " {})", a, b)


def _divide(a: Any, b: Any) -> Any:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return NotImplemented
    if not isinstance(a, Sym) and not isinstance(b, Sym):
        return _fold(np.true_divide, a, b)
    if "b" in (_kind(a), _kind(b)):
        raise Untraceable("a division of booleans")
    if not isinstance(b, Sym) and _python(b) != 0:
        return _emit("f", "({} / {})", a, b)
    # Python raises where numpy divides by zero: numpy's own quotient then (inf, nan, signed zeros).
    return _emit("f", "({0} / {1} if {1} else _div0({0}, {1}))", a, b)


def _remainder(a: Any, b: Any) -> Any:
    """``%`` of integers (Python's and numpy's agree: the sign of the divisor); floats refused."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return NotImplemented
    if not isinstance(a, Sym) and not isinstance(b, Sym):
        return _fold(np.remainder, a, b)
    if _kind(a) != "i" or _kind(b) != "i":
        raise Untraceable("a remainder of floats or booleans")
    if not isinstance(b, Sym) and _python(b) != 0:
        return _emit("i", "({} % {})", a, b)
    return _emit("i", "({0} % {1} if {1} else 0)", a, b)  # numpy's remainder by zero


def _power(a: Any, b: Any) -> Any:
    if not isinstance(a, Sym):
        raise Untraceable("a power of a constant to a recorded value")
    if isinstance(b, Sym) or _python(b) not in (2, 0.5):
        raise Untraceable("a power other than square or square root")
    if a.kind == "b":
        raise Untraceable("a power of booleans")
    # numpy's fast paths of x ** 2 and x ** 0.5: square and sqrt.
    return _square(a) if _python(b) == 2 else _sqrt(a)


def _unary(numpy_fn: Any, refused: str, why: str, templates: dict[str, str]) -> Callable[[Any], Any]:
    """A unary operation: numpy's own on a constant, refused on values of kind ``refused``, else
    the template for the value's kind (``*``: any other)."""

    def fn(a: Any) -> Any:
        if not isinstance(a, Sym):
            return _fold(numpy_fn, a)
        if a.kind == refused:
            raise Untraceable(why)
        return _emit(a.kind, templates.get(a.kind, templates["*"]), a)

    return fn


_negative = _unary(np.negative, "b", "numpy refuses to negate booleans", {"*": "(-{})"})
_absolute = _unary(np.absolute, "b", "the absolute value of booleans", {"*": "abs({})"})
_invert = _unary(np.invert, "f", "numpy refuses to invert floats", {"b": "(not {})", "*": "(~{})"})


def _logical(op: str, a: Any, b: Any) -> Any:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return NotImplemented
    if not isinstance(a, Sym) and not isinstance(b, Sym):
        return _fold({"&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor}[op], a, b)
    ka, kb = _kind(a), _kind(b)
    if "f" in (ka, kb) or ka != kb:
        raise Untraceable("a bitwise operation on floats or on mixed kinds")
    return _emit(ka, "({} " + op + " {})", a, b)


_COMPARE_UFUNC = {
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
    "==": np.equal, "!=": np.not_equal,
}  # fmt: skip


def _compare(op: str, a: Any, b: Any) -> Any:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return NotImplemented
    if not isinstance(a, Sym) and not isinstance(b, Sym):
        return _fold(_COMPARE_UFUNC[op], a, b)
    return _emit("b", "({} " + op + " {})", a, b)


def _where(c: Any, a: Any, b: Any) -> Any:
    if not isinstance(c, Sym):
        return a if _python(c) else b
    if c.kind != "b":
        raise Untraceable("a condition that is not boolean")
    ka, kb = _kind(a), _kind(b)
    if ka != kb:  # numpy's result type: the wider kind
        if "b" in (ka, kb):
            raise Untraceable("where() between a boolean and a number")
        a, b = (_to_float(a), _to_float(b)) if "f" in (ka, kb) else (a, b)
    return _emit(_kind(a), "({1} if {0} else {2})", c, a, b)


def _to_float(a: Any) -> Any:
    """float64 of a value of any kind (astype's conversion)."""
    if not isinstance(a, Sym):
        return float(_python(a))
    if a.kind == "f":
        return a
    return _emit("f", "(1.0 if {} else 0.0)" if a.kind == "b" else "float({})", a)


def _to_int(a: Any) -> Any:
    """int64 of a value of any kind: a float truncated toward zero, as numpy casts it."""
    if not isinstance(a, Sym):
        return int(np.asarray(_python(a)).astype(np.int64))
    if a.kind == "i":
        return a
    return _emit("i", "(1 if {} else 0)" if a.kind == "b" else "_trunc({})", a)


def _trunc(x: float) -> int:
    """numpy's cast of a float64 to int64: toward zero; NaN, infinities and what int64 cannot hold
    as numpy's cast gives them on this machine."""
    if math.isfinite(x) and -(2.0**63) <= x < 2.0**63:
        return int(x)
    with np.errstate(all="ignore"):
        return int(np.float64(x).astype(np.int64))


def _to_bool(a: Any) -> Any:
    if not isinstance(a, Sym):
        return bool(_python(a))
    return a if a.kind == "b" else _compare("!=", a, 0.0 if a.kind == "f" else 0)


def _math(name: str, numpy_fn: Any) -> Callable[[Any], Any]:
    """A unary function of floats by the helper ``name`` of the compiled code's namespace."""

    def fn(a: Any) -> Any:
        if not isinstance(a, Sym):
            return _fold(numpy_fn, a)
        if a.kind != "f":
            a = _to_float(a)
        return _emit("f", name + "({})", a)

    return fn


def _square(a: Any) -> Any:
    return _binary("*", a, a)


_sqrt = _math("_sqrt", np.sqrt)


def _isfinite(a: Any) -> Any:
    if not isinstance(a, Sym):
        return _fold(np.isfinite, a)
    return _emit("b", "_isfinite({})", a) if a.kind == "f" else True


def _isnan(a: Any) -> Any:
    if not isinstance(a, Sym):
        return _fold(np.isnan, a)
    return _emit("b", "({0} != {0})", a) if a.kind == "f" else False


def _maximum(a: Any, b: Any) -> Any:
    """host_xp.maximum's values: ``a`` where ``a > b`` or ``a`` is NaN, else ``b``."""
    return _where(_logical("|", _compare(">", a, b), _isnan(a)), a, b)


def _minimum(a: Any, b: Any) -> Any:
    return _where(_logical("|", _compare("<", a, b), _isnan(a)), a, b)


def _logical_and(a: Any, b: Any) -> Any:
    return _logical("&", _to_bool(a), _to_bool(b))


def _logical_or(a: Any, b: Any) -> Any:
    return _logical("|", _to_bool(a), _to_bool(b))


def _logical_not(a: Any) -> Any:
    return _invert(_to_bool(a))


def _binary_math(name: str, numpy_fn: Any) -> Callable[[Any, Any], Any]:
    """A function of two floats by the helper ``name`` of the compiled code's namespace."""

    def fn(a: Any, b: Any) -> Any:
        if not isinstance(a, Sym) and not isinstance(b, Sym):
            return _fold(numpy_fn, a, b)
        return _emit("f", name + "({}, {})", _to_float(a), _to_float(b))

    return fn


_ELEMENTWISE: dict[Any, Callable[..., Any]] = {
    np.add: lambda a, b: _binary("+", a, b),
    np.subtract: lambda a, b: _binary("-", a, b),
    np.multiply: lambda a, b: _binary("*", a, b),
    np.true_divide: _divide,
    np.negative: _negative,
    np.positive: lambda a: a,
    np.absolute: _absolute,
    np.square: _square,
    np.sqrt: _sqrt,
    np.power: _power,
    # numpy's own functions give numpy's values (its SIMD kernels: a value's numpy scalar).
    np.exp: _math("_np_exp", np.exp),
    np.tanh: _math("_np_tanh", np.tanh),
    np.tan: _math("_np_tan", np.tan),
    np.sin: _math("_np_sin", np.sin),
    np.cos: _math("_np_cos", np.cos),
    np.arctan: _math("_np_atan", np.arctan),
    np.arctan2: _binary_math("_np_atan2", np.arctan2),
    np.hypot: _binary_math("_np_hypot", np.hypot),
    np.remainder: _remainder,
    np.less: lambda a, b: _compare("<", a, b),
    np.less_equal: lambda a, b: _compare("<=", a, b),
    np.greater: lambda a, b: _compare(">", a, b),
    np.greater_equal: lambda a, b: _compare(">=", a, b),
    np.equal: lambda a, b: _compare("==", a, b),
    np.not_equal: lambda a, b: _compare("!=", a, b),
    np.bitwise_and: lambda a, b: _logical("&", a, b),
    np.bitwise_or: lambda a, b: _logical("|", a, b),
    np.bitwise_xor: lambda a, b: _logical("^", a, b),
    np.invert: _invert,
    np.logical_and: _logical_and,
    np.logical_or: _logical_or,
    np.logical_not: _logical_not,
    np.isfinite: _isfinite,
    np.isnan: _isnan,
    np.maximum: _maximum,
    np.minimum: _minimum,
}
"""numpy's ufuncs the recorder follows, each as a function of recorded scalars."""

_HOST_XP_MATH: dict[str, Callable[..., Any]] = {
    "exp": _math("_exp", np.exp),
    "tanh": _math("_tanh", np.tanh),
    "tan": _math("_tan", np.tan),
    "arctan": _math("_atan", np.arctan),
    "atan": _math("_atan", np.arctan),
    "arctan2": _binary_math("_atan2", np.arctan2),
    "atan2": _binary_math("_atan2", np.arctan2),
}
"""``host_xp``'s functions that compute one world's values with ``math`` (up to its ``SMALL``
values; a wider array is numpy's there, and here)."""


def _math_or_numpy(math_fn: Callable[[float], float], numpy_fn: Any) -> Callable[[float], float]:
    """``math_fn`` where it returns a value, numpy's where it raises (overflow, a negative root)."""
    fallback = _numpy_scalar(numpy_fn)

    def fn(x: float) -> float:
        try:
            return math_fn(x)
        except (OverflowError, ValueError):
            return fallback(x)

    return fn


def _numpy_scalar(numpy_fn: Any) -> Callable[..., float]:
    """``numpy_fn`` on Python floats as numpy computes an array's values, as a Python float."""

    def fn(*xs: float) -> float:
        with np.errstate(all="ignore"):
            return float(numpy_fn(*xs))

    return fn


_NUMPY_FUNCTIONS = {
    "exp": np.exp, "tanh": np.tanh, "tan": np.tan, "sin": np.sin, "cos": np.cos,
    "atan": np.arctan, "atan2": np.arctan2, "hypot": np.hypot,
}  # fmt: skip
"""numpy's functions compiled code calls as ``_np_<name>`` (numpy's values)."""

_HELPERS: dict[str, Any] = {
    "_INF": math.inf,
    "_NAN": math.nan,
    "_isfinite": math.isfinite,
    "_atan2": math.atan2,
    "_tanh": math.tanh,
    "_atan": math.atan,
    "_sqrt": _math_or_numpy(math.sqrt, np.sqrt),
    "_exp": _math_or_numpy(math.exp, np.exp),
    "_tan": _math_or_numpy(math.tan, np.tan),
    "_trunc": _trunc,
    "_div0": _numpy_scalar(np.true_divide),  # numpy's quotient by zero: inf, nan, signed zeros
    **{f"_np_{name}": _numpy_scalar(fn) for name, fn in _NUMPY_FUNCTIONS.items()},
}
"""What compiled code calls besides Python's operators."""


# -- reductions --------------------------------------------------------------------------------
def _pairwise_sum(values: Sequence[Any]) -> Any:
    """numpy's float64 sum of a row, in its order: left to right below eight values, else eight
    accumulators combined pairwise, then the rest (its ``pairwise_sum``)."""
    n = len(values)
    if n == 0:
        return 0.0
    if n < 8:
        total = values[0]
        for v in values[1:]:
            total = _binary("+", total, v)
        return total
    if n <= 128:
        acc = list(values[:8])
        i = 8
        while i < n - n % 8:
            for j in range(8):
                acc[j] = _binary("+", acc[j], values[i + j])
            i += 8
        pair = [_binary("+", acc[2 * j], acc[2 * j + 1]) for j in range(4)]
        total = _binary("+", _binary("+", pair[0], pair[1]), _binary("+", pair[2], pair[3]))
        for v in values[i:]:
            total = _binary("+", total, v)
        return total
    half = n // 2
    half -= half % 8
    return _binary("+", _pairwise_sum(values[:half]), _pairwise_sum(values[half:]))


def _all(values: Sequence[Any]) -> Any:
    total: Any = True
    for v in values:
        total = _logical("&", _to_bool(total), _to_bool(v))
    return total


def _any(values: Sequence[Any]) -> Any:
    total: Any = False
    for v in values:
        total = _logical("|", _to_bool(total), _to_bool(v))
    return total


_REDUCTIONS: dict[Any, Callable[[Sequence[Any]], Any]] = {
    np.add: _pairwise_sum,
    np.logical_and: _all,
    np.logical_or: _any,
}


def _reduce(fn: Callable[[Sequence[Any]], Any], x: Any, axis: Any, keepdims: bool) -> SymArray:
    a = _objects(x)
    _count_array_op([a])
    if fn is _pairwise_sum and any(_kind(v) == "b" for v in a.flat):
        raise Untraceable("a sum of booleans")
    if axis is None:
        result = np.empty((), dtype=object)
        result[()] = fn(list(a.flat))
        out = result.reshape((1,) * a.ndim) if keepdims else result
        return out.view(SymArray)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(ax % a.ndim for ax in axes)
    kept = [ax for ax in range(a.ndim) if ax not in axes]
    moved = np.transpose(a, kept + list(axes))
    rows = moved.reshape(*(a.shape[ax] for ax in kept), -1)
    out = np.empty(rows.shape[:-1], dtype=object)
    for index in np.ndindex(out.shape):
        out[index] = fn(list(rows[index]))
    if keepdims:
        out = out.reshape(tuple(1 if ax in axes else a.shape[ax] for ax in range(a.ndim)))
    return out.view(SymArray)


# -- arrays of recorded scalars ----------------------------------------------------------------
def _objects(x: Any) -> np.ndarray:
    """``x`` as a plain object array: recorded scalars, or the constants of a numeric array."""
    if isinstance(x, SymArray):
        return x.view(np.ndarray)
    if isinstance(x, np.ndarray):
        if x.dtype == object:
            return x
        if x.dtype.kind == "f" and x.dtype != np.float64:
            raise Untraceable(f"a term computes with {x.dtype}")
        return x.astype(object)  # Python numbers: the constants of the compiled code
    if isinstance(x, Sym):
        out = np.empty((), dtype=object)
        out[()] = x
        return out
    return _objects(np.asarray(x))  # Python numbers and numpy scalars, by their arrays' type


def _count_array_op(arrays: Sequence[np.ndarray]) -> None:
    for a in arrays:
        for v in a.flat:
            if isinstance(v, Sym):
                v.rec.array_ops += 1
                return


def _elementwise(fn: Callable[..., Any], *xs: Any) -> SymArray:
    arrays = [_objects(x) for x in xs]
    _count_array_op(arrays)
    result = np.frompyfunc(fn, len(arrays), 1)(*arrays)
    return _objects(result).view(SymArray) if not isinstance(result, np.ndarray) else result.view(SymArray)


class SymArray(np.ndarray):
    """An object array of recorded scalars that numpy's operators and functions record on."""

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, out: Any = None, **kwargs: Any) -> Any:
        if method == "__call__":
            if set(kwargs) - {"dtype"} or kwargs.get("dtype") not in (None, object):
                raise Untraceable(f"np.{ufunc.__name__} with {sorted(kwargs)}")
            fn = _ELEMENTWISE.get(ufunc)
            if fn is None:
                raise Untraceable(f"np.{ufunc.__name__} is not one the recorder follows")
            result = _elementwise(fn, *inputs)
        elif method == "reduce" and ufunc in _REDUCTIONS:
            if set(kwargs) - {"axis", "keepdims", "dtype"} or kwargs.get("dtype") not in (None, object):
                raise Untraceable(f"np.{ufunc.__name__}.reduce with {sorted(kwargs)}")
            result = _reduce(
                _REDUCTIONS[ufunc], inputs[0], kwargs.get("axis", 0), kwargs.get("keepdims", False)
            )
        else:
            raise Untraceable(f"np.{ufunc.__name__}.{method}")
        if out is not None:
            target = out[0] if isinstance(out, tuple) else out
            target[...] = result
            return target
        return result

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        own = _ARRAY_FUNCTIONS.get(func)
        if own is None:
            raise Untraceable(f"np.{func.__name__} is not one the recorder follows")
        if own is not _NUMPY_ITSELF:
            return own(*args, **kwargs)
        result = super().__array_function__(func, types, args, kwargs)
        if isinstance(result, list | tuple):
            return type(result)(_as_recorded(r) for r in result)
        return _as_recorded(result)

    def __bool__(self) -> bool:
        raise Untraceable("a term branches on an array's value")

    def __getitem__(self, key: Any) -> Any:
        keys = key if isinstance(key, tuple) else (key,)
        if any(_recorded(k) for k in keys):
            return _gather(self.view(np.ndarray), keys)
        return super().__getitem__(key)

    @property
    def dtype(self) -> np.dtype[Any]:
        """The type numpy would give the values (terms read it to make arrays like these)."""
        return np.dtype(_KIND_DTYPE[_common_kind(self.view(np.ndarray))])

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:
        return _astype(self, dtype)

    def tolist(self) -> Any:  # elements as they are: recorded scalars
        return self.view(np.ndarray).tolist()


def _recorded(k: Any) -> bool:
    """Whether an index holds recorded values (a value chosen by the terms, not a constant)."""
    if isinstance(k, Sym):
        return True
    if not isinstance(k, np.ndarray):
        return False
    plain = k.view(np.ndarray)  # a recorded array's dtype reads as its values' type
    return plain.dtype == object and any(isinstance(v, Sym) for v in plain.flat)


def _gather(base: np.ndarray, keys: tuple[Any, ...]) -> Any:
    """``base[keys]`` where one index holds recorded integers: each element picks its value from a
    tuple of the candidates along that axis, ``(c0, c1, ...)[i]``, which wraps a negative index and
    refuses one out of range as numpy does (IndexError)."""
    at = [p for p, k in enumerate(keys) if _recorded(k)]
    if len(at) != 1 or any(k is None or k is Ellipsis for k in keys[: at[0]]):
        raise Untraceable("an index by more than one recorded array, or after a new axis")
    p = at[0]
    index = _objects(keys[p])
    if any(_kind(v) != "i" for v in index.flat):
        raise Untraceable("an index by recorded values that are not integers")
    # Which element of the index each result element used: index an array whose values along the
    # axis are the positions of the index's elements, with the same other keys.
    ids = np.arange(index.size).reshape(index.shape)
    positions = np.broadcast_to(
        np.arange(index.size).reshape((1,) * p + (-1,) + (1,) * (base.ndim - p - 1)),
        (*base.shape[:p], index.size, *base.shape[p + 1 :]),
    )
    used = positions[(*keys[:p], ids, *keys[p + 1 :])]
    candidates = [
        base[(*keys[:p], np.full(index.shape, d, dtype=np.intp), *keys[p + 1 :])]
        for d in range(base.shape[p])
    ]
    out = np.empty(np.shape(used), dtype=object)
    flat_index = list(index.flat)
    for e, j in enumerate(np.ravel(used)):
        values = [np.ravel(c)[e] for c in candidates]
        kinds = {_kind(v) for v in values}
        if len(kinds) != 1:
            raise Untraceable("an index into values of mixed kinds")
        template = "(" + "{}, " * len(values) + ")[{}]"
        out.reshape(-1)[e] = _emit(kinds.pop(), template, *values, flat_index[j])
    return out.view(SymArray) if out.ndim else out[()]


def _as_recorded(x: Any) -> Any:
    """numpy's result on recorded arrays as a recorded array (numbers, shapes, as they are)."""
    return x.view(SymArray) if isinstance(x, np.ndarray) and x.dtype == object else x


def _astype(x: Any, dtype: Any) -> SymArray:
    target = np.dtype(dtype)
    if target == np.float64:
        return _elementwise(_to_float, x)
    if target == np.bool_:
        return _elementwise(_to_bool, x)
    if target == np.int64:
        return _elementwise(_to_int, x)
    if target == np.dtype(object):
        return _objects(x).copy().view(SymArray)
    raise Untraceable(f"a conversion to {target}")


def _np_where(condition: Any, x: Any = None, y: Any = None) -> SymArray:
    if x is None or y is None:
        raise Untraceable("np.where with one argument")
    return _elementwise(_where, condition, x, y)


def _np_clip(x: Any, a_min: Any = None, a_max: Any = None, *args: Any, **kwargs: Any) -> SymArray:
    """host_xp.clip's values: the lower bound where ``x <= low``, then the upper where ``x >= high``."""
    if args or kwargs:
        raise Untraceable("np.clip with options")
    if a_min is not None:
        x = _elementwise(lambda v, low: _where(_compare("<=", v, low), low, v), x, a_min)
    if a_max is not None:
        x = _elementwise(lambda v, high: _where(_compare(">=", v, high), high, v), x, a_max)
    return x if isinstance(x, SymArray) else _objects(x).view(SymArray)


def _filled(shape: Any, value: Any, kind: str) -> SymArray:
    """An array of one constant of numpy's ``kind``."""
    return np.full(shape, _literal(value, kind), dtype=object).view(SymArray)


def _like(value: Any) -> Callable[..., SymArray]:
    def fn(x: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> SymArray:
        a = _objects(x)
        return _filled(a.shape, value, _dtype_kind(dtype) if dtype is not None else _common_kind(a))

    return fn


_KIND_DTYPE = {"f": np.float64, "i": np.int64, "b": np.bool_}


def _common_kind(a: np.ndarray) -> str:
    kinds = {_kind(v) for v in a.flat}
    return "f" if "f" in kinds or not kinds else "i" if "i" in kinds else "b"


def _dtype_kind(dtype: Any) -> str:
    target = np.dtype(dtype)
    if target.kind not in ("f", "i", "b") or (target.kind == "f" and target != np.float64):
        raise Untraceable(f"a term computes with {target}")
    return target.kind


def _literal(value: float, kind: str) -> Any:
    return bool(value) if kind == "b" else int(value) if kind == "i" else float(value)


_NUMPY_ITSELF = object()
_ARRAY_FUNCTIONS: dict[Any, Any] = {
    **{
        f: _NUMPY_ITSELF
        for f in (
            np.concatenate, np.stack, np.hstack, np.vstack, np.reshape, np.ravel, np.expand_dims,
            np.squeeze, np.broadcast_to, np.broadcast_arrays, np.copy, np.transpose, np.moveaxis,
            np.atleast_1d, np.atleast_2d, np.tile, np.repeat, np.sum, np.all, np.any, np.shape,
            np.ndim, np.size, np.take, np.split, np.flip,
        )
    },
    np.where: _np_where,
    np.clip: _np_clip,
    np.zeros_like: _like(0),
    np.ones_like: _like(1),
    np.full_like: lambda x, fill, dtype=None: _like(fill)(x, dtype),
}  # fmt: skip
"""numpy's array functions the recorder follows: its own (shapes, reductions) or its own version."""


def _lift(x: Any) -> Any:
    """Python numbers, numpy arrays or recorded arrays as one recorded array."""
    return x if isinstance(x, SymArray) else _objects(x).view(SymArray)


# -- the namespace terms compute with while recorded --------------------------------------------
class _RecordingXp:
    """``env.xp`` while terms are recorded: host_xp's functions on recorded arrays."""

    def __init__(self) -> None:
        self.linalg = _RecordingLinalg()

    def asarray(self, x: Any, dtype: Any = None, copy: Any = None, device: Any = None) -> SymArray:
        a = _lift(x)
        if dtype is not None:
            return _astype(a, dtype)
        return a.copy() if copy else a

    def astype(self, x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None) -> SymArray:
        return _astype(x, dtype)

    def zeros(self, shape: Any, dtype: Any = np.float64, device: Any = None) -> SymArray:
        return _filled(shape, 0, _dtype_kind(dtype))

    def ones(self, shape: Any, dtype: Any = np.float64, device: Any = None) -> SymArray:
        return _filled(shape, 1, _dtype_kind(dtype))

    def full(self, shape: Any, fill_value: Any, dtype: Any = np.float64, device: Any = None) -> SymArray:
        return _filled(shape, fill_value, _dtype_kind(dtype))

    def zeros_like(self, x: Any, /, dtype: Any = None, **kwargs: Any) -> SymArray:
        return _like(0)(x, dtype)

    def ones_like(self, x: Any, /, dtype: Any = None, **kwargs: Any) -> SymArray:
        return _like(1)(x, dtype)

    def where(self, condition: Any, x: Any, y: Any, /) -> SymArray:
        return _np_where(condition, x, y)

    def clip(self, x: Any, /, min: Any = None, max: Any = None) -> SymArray:
        return _np_clip(x, min, max)

    def sum(self, x: Any, /, *, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> SymArray:
        if dtype is not None:
            raise Untraceable("sum with a dtype")
        return _reduce(_pairwise_sum, x, axis, keepdims)

    def all(self, x: Any, /, *, axis: Any = None, keepdims: bool = False) -> SymArray:
        return _reduce(_all, x, axis, keepdims)

    def any(self, x: Any, /, *, axis: Any = None, keepdims: bool = False) -> SymArray:
        return _reduce(_any, x, axis, keepdims)

    def reshape(self, x: Any, /, shape: Any, *, copy: Any = None) -> SymArray:
        return _lift(x).reshape(shape)

    def concat(self, arrays: Sequence[Any], /, *, axis: int = 0) -> SymArray:
        return np.concatenate([_objects(a) for a in arrays], axis=axis).view(SymArray)

    concatenate = concat

    def stack(self, arrays: Sequence[Any], /, *, axis: int = 0) -> SymArray:
        return np.stack([_objects(a) for a in arrays], axis=axis).view(SymArray)

    def expand_dims(self, x: Any, /, axis: int) -> SymArray:
        return np.expand_dims(_objects(x), axis).view(SymArray)

    def arange(self, *args: Any, dtype: Any = None, device: Any = None) -> Any:
        """Constants: numpy's own array (an index of every world, say)."""
        return np.arange(*args, dtype=dtype)

    def tile(self, x: Any, reps: Any) -> SymArray:
        return np.tile(_objects(x), reps).view(SymArray)

    def all_finite(self, x: Any) -> Any:
        raise Untraceable("a branch on finiteness")

    any_true = all_finite

    def __getattr__(self, name: str) -> Any:
        if name in _NAMES:  # types and constants, as numpy's
            return getattr(np, name)
        if name in _HOST_XP_MATH:
            return functools.partial(_host_xp_math, name)
        fn = getattr(np, name, None)
        if fn in _ELEMENTWISE:
            return lambda *xs: _elementwise(_ELEMENTWISE[fn], *xs)
        if name in ("atan", "atan2", "abs", "pow"):  # the array API's names of numpy's ufuncs
            alias = {"atan": np.arctan, "atan2": np.arctan2, "abs": np.absolute, "pow": np.power}[name]
            return lambda *xs: _elementwise(_ELEMENTWISE[alias], *xs)
        raise Untraceable(f"xp.{name} is not one the recorder follows")


def _host_xp_math(name: str, *xs: Any) -> SymArray:
    """``host_xp``'s ``name``: ``math``'s values on one world's few float64 values, numpy's on more
    or on other types."""
    arrays = [_objects(x) for x in xs]
    if max(a.size for a in arrays) > host_xp.SMALL or any(_kind(v) != "f" for a in arrays for v in a.flat):
        alias = {"atan": "arctan", "atan2": "arctan2"}.get(name, name)
        return _elementwise(_ELEMENTWISE[getattr(np, alias)], *xs)
    return _elementwise(_HOST_XP_MATH[name], *xs)


_NAMES = {"bool", "float64", "float32", "int64", "int32", "newaxis", "pi", "e", "inf", "nan"}


class _RecordingLinalg:
    def vector_norm(self, x: Any, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> SymArray:
        """host_xp's norm: ``sqrt(add.reduce(x * x))``."""
        if ord != 2 or not isinstance(axis, int):
            raise Untraceable("a norm other than the Euclidean one over one axis")
        squares = _elementwise(_square, x)
        return _elementwise(_sqrt, _reduce(_pairwise_sum, squares, axis, keepdims))

    def __getattr__(self, name: str) -> Any:
        raise Untraceable(f"xp.linalg.{name} is not one the recorder follows")


RECORDING_XP = _RecordingXp()


# -- leaves: what a compiled group reads each step -----------------------------------------------
@dataclass
class _Leaf:
    """One array the compiled code reads: its reading code, size and recorded elements."""

    name: str
    read: str
    """An expression of ``_w`` (the worlds), ``_a`` (the group's argument), ``_r<n>`` (readers)
    and ``_v<n>`` (live views): the array, whose values the code reads with ``tolist``."""
    size: int
    array: SymArray
    """The elements as recorded (``array`` itself may be written to by a term: state)."""
    elements: tuple[Any, ...]
    live: bool
    """``read`` names a flat live view: its size never changes, and it needs no ``ravel``."""


class _Leaves:
    def __init__(self, rec: _Recording) -> None:
        self.rec = rec
        self.leaves: dict[str, _Leaf] = {}
        self.readers: dict[str, Any] = {}

    def array(self, key: str, read: str, real: Any, live: bool = False) -> SymArray:
        """The recorded array of ``real`` (read each step by ``read``), one per key."""
        leaf = self.leaves.get(key)
        if leaf is not None:
            return leaf.array
        real = np.asarray(real)
        kind = {"f": "f", "i": "i", "u": "i", "b": "b"}.get(real.dtype.kind)
        if kind is None or (kind == "f" and real.dtype != np.float64):
            raise Untraceable(f"{key} is {real.dtype}, not float64, int64 or bool")
        name = f"L{len(self.leaves)}"
        elements = [Sym(self.rec, f"{name}[{i}]", kind, (name,)) for i in range(real.size)]
        array = np.empty(real.shape, dtype=object)
        array.reshape(-1)[:] = elements if elements else []
        leaf = _Leaf(name, read, real.size, array.view(SymArray), tuple(elements), live)
        self.leaves[key] = leaf
        return leaf.array

    def reader(self, fn: Any) -> str:
        """The name the compiled code calls ``fn`` by (or, for an array, reads it by)."""
        name = f"_{'v' if isinstance(fn, np.ndarray) else 'r'}{len(self.readers)}"
        self.readers[name] = fn
        return name


_SIM_READS = ("frame_pos", "frame_quat", "frame_linvel", "frame_angvel", "joint_pos", "joint_vel", "mj_field")
"""The backend methods a compiled group may call: reads of the state of every world."""


class _RecordingSim:
    """``env.sim`` while terms are recorded: its reads as leaves, nothing else."""

    def __init__(self, sim: Any, leaves: _Leaves) -> None:
        self._sim, self._leaves = sim, leaves

    def __getattr__(self, name: str) -> Any:
        if name == "name":
            return self._sim.name
        if name not in _SIM_READS:
            raise Untraceable(f"env.sim.{name} is not a read of the state")
        method = getattr(self._sim, name)

        def read(*args: Any) -> SymArray:
            key = f"sim.{name}{args!r}"
            if key in self._leaves.leaves:
                return self._leaves.array(key, "", None)
            real = method(*args)
            # A backend with live views returns one array at every call for a view it keeps: the
            # compiled code reads that array itself, flat (a gathered copy is a new array each call).
            if getattr(self._sim, "live_views", False) and method(*args) is real:
                flat = real.reshape(-1)
                if np.shares_memory(flat, real):
                    return self._leaves.array(key, self._leaves.reader(flat), real, live=True)
            return self._leaves.array(key, f"{self._leaves.reader(functools.partial(method, *args))}()", real)

        return read


class _RecordingView:
    """The :class:`~robolearn.tasks.core.TaskEnvView` of one world while its terms are recorded."""

    def __init__(self, worlds: Any, leaves: _Leaves) -> None:
        self._worlds, self._leaves = worlds, leaves
        self.cfg, self.num_envs, self.device = worlds.cfg, 1, worlds.device
        self.xp, self.float_dtype = RECORDING_XP, np.float64
        self.sim = _RecordingSim(worlds.sim, leaves)
        self.state = {
            key: leaves.array(f"state.{key}", f"_w.state[{key!r}]", value)
            for key, value in worlds.state.items()
        }
        self.originals = dict(self.state)
        self._attrs: dict[str, Any] = {}
        self._terminations: dict[str, Any] | None = None

    def constant(self, value: float | tuple[float, ...]) -> Any:
        return self._worlds.constant(value)

    def _attr(self, name: str) -> Any:
        if name not in self._attrs:
            self._attrs[name] = self._leaves.array(name, f"_w.{name}", getattr(self._worlds, name))
        return self._attrs[name]

    @property
    def step_count(self) -> Any:
        return self._attr("step_count")

    @property
    def action(self) -> Any:
        return self._attr("action")

    @property
    def prev_action(self) -> Any:
        return self._attr("prev_action")

    @property
    def rng(self) -> Any:
        raise Untraceable("a term draws random numbers")

    @property
    def step_success(self) -> Any:
        return self._attr("step_success")

    @step_success.setter
    def step_success(self, value: Any) -> None:
        self._attrs["step_success"] = value

    @property
    def step_terminations(self) -> dict[str, Any]:
        if self._terminations is None:
            self._terminations = {
                key: self._leaves.array(f"terminations.{key}", f"_w.step_terminations[{key!r}]", value)
                for key, value in self._worlds.step_terminations.items()
            }
        return self._terminations


# -- compiling --------------------------------------------------------------------------------
@dataclass
class Program:
    """A compiled group: ``fn(worlds, argument)`` writes the task state the group writes and
    returns its outputs, each as a list of Python numbers."""

    fn: Callable[[Any, Any], tuple[list[Any], ...]]
    source: str
    shapes: tuple[tuple[int, ...], ...]
    """Each output's shape as the terms made it."""
    dtypes: tuple[np.dtype[Any], ...]
    """Each output's type as numpy would have made it."""
    array_ops: int
    """numpy calls the array path makes for the same (each elementwise operation or reduction)."""
    operations: int
    """Operations on floats of the compiled code."""
    reads: int
    """Arrays it reads (a call and a ``tolist`` each)."""

    @property
    def faster_than_arrays(self) -> bool:
        """Whether the compiled code is estimated to take less time than the array path: wide
        arrays (ant's 84 contact forces) make many operations of one numpy call."""
        compiled = OPERATION_US * self.operations + READ_US * self.reads
        return compiled < NUMPY_CALL_US * self.array_ops


NUMPY_CALL_US = 0.7
"""What a numpy call of the array path costs on one world's values, with its share of the term
calls around it (us). This and the two below were measured on a 2-core AMD EPYC VM (each group of
ant's and pick-cube's terms timed both ways): ant's step terms, 26 numpy calls, took 19.1 us on
arrays and 8.0 compiled (591 operations, 7 arrays read); pick-cube's, 23 calls, 18.1 and 1.2; ant's
observation (a clip of 78 contact forces, 2 calls) 7.2 us either way."""
OPERATION_US = 0.01
"""What one operation of compiled code costs (us)."""
READ_US = 0.3
"""What reading one array costs compiled code (the reader's call, ``ravel``, ``tolist``; us)."""


def _values(x: Any) -> list[Any]:
    return list(_objects(x).reshape(-1))


def _same(xs: Sequence[Any], ys: Sequence[Any]) -> bool:
    """Element by element the same objects (``==`` on recorded scalars records a comparison)."""
    return len(xs) == len(ys) and all(x is y for x, y in zip(xs, ys, strict=True))


def compile_group(
    worlds: Any,
    label: str,
    record: Callable[[_RecordingView, Any], Sequence[Any]],
    argument: Any = None,
) -> Program:
    """Record ``record(view, argument)`` (which returns the group's outputs, arrays of one world)
    and compile it; raises :class:`Untraceable` where the recorder cannot follow the terms."""
    rec = _Recording()
    leaves = _Leaves(rec)
    view = _RecordingView(worlds, leaves)
    arg = None if argument is None else leaves.array("argument", "_a", argument)
    results = [_lift(o) for o in record(view, arg)]
    outputs = [_values(o) for o in results]
    # What a term wrote: task state (kept, written back), anything else (refused).
    for key, leaf in leaves.leaves.items():
        if not key.startswith("state.") and not _same(_values(leaf.array), leaf.elements):
            raise Untraceable(f"a term writes to {key}")
    writes: dict[str, list[Any]] = {}
    for key, original in view.originals.items():
        current = view.state.get(key)
        if current is None or _objects(current).shape != _objects(original).shape:
            raise Untraceable(f"a term replaces task state {key!r} by another shape")
        if current is not original or not _same(_values(current), leaves.leaves[f"state.{key}"].elements):
            if worlds.state[key].dtype != np.float64 or not worlds.state[key].flags.c_contiguous:
                raise Untraceable(f"task state {key!r} is not a float64 block")
            writes[key] = _values(current)
    if set(view.state) != set(view.originals):
        raise Untraceable("a term adds task state")
    source, operations, reads = _source(rec, leaves, outputs, writes, label)
    namespace: dict[str, Any] = {**_HELPERS, **leaves.readers, "StaleProgram": StaleProgram}
    exec(compile(source, f"<robolearn one world: {label}>", "exec"), namespace)  # our own recording
    shapes = tuple(r.shape for r in results)
    return Program(
        namespace["program"],
        source,
        shapes,
        tuple(r.dtype for r in results),
        rec.array_ops,
        operations,
        reads,
    )


def _replace_name(code: str, name: str, expression: str) -> str:
    """``code`` with the variable ``name`` replaced by ``expression`` (whole words only)."""
    return re.sub(rf"\b{name}\b", lambda _: expression, code)


MAX_INLINE_DEPTH = 40
"""Deepest nesting of values written into their use (Python's parser allows 200 parentheses)."""


def _source(
    rec: _Recording, leaves: _Leaves, outputs: list[list[Any]], writes: dict[str, list[Any]], label: str
) -> tuple[str, int, int]:
    """The recorded operations that the outputs and state writes need, as ``def program(_w, _a)``
    (every leaf read and checked first, the state written last: a stale leaf changes nothing),
    how many operations it does and how many arrays it reads."""
    needed: set[str] = set()
    for values in [*outputs, *writes.values()]:
        for v in values:
            needed.update(_code(v)[1])
    kept: list[tuple[str, str, tuple[str, ...]]] = []
    for name, code, deps in reversed(rec.lines):
        if name in needed:
            kept.append((name, code, deps))
            needed.update(deps)
    kept.reverse()
    # A value used once is written into its one use, not stored (a local's store and load cost
    # about as much as an addition), up to a nesting depth the parser takes with room to spare.
    uses = collections.Counter(d for _, _, deps in kept for d in deps)
    uses.update(d for values in [*outputs, *writes.values()] for v in values for d in _code(v)[1])
    inlined: dict[str, tuple[str, int]] = {}

    def substituted(code: str, deps: Iterable[str]) -> tuple[str, int]:
        depth = 1
        for dep in set(deps):
            if dep in inlined:
                expression, inner = inlined.pop(dep)
                code = _replace_name(code, dep, expression)
                depth = max(depth, inner + 1)
        return code, depth

    statements = []
    for name, code, deps in kept:
        code, depth = substituted(code, deps)
        if uses[name] == 1 and depth < MAX_INLINE_DEPTH:
            inlined[name] = (code, depth)
        else:
            statements.append(f"    {name} = {code}")

    def value(v: Any) -> str:
        code, deps = _code(v)
        return substituted(code, deps)[0]

    body = [f"def program(_w, _a):  # {label}"]
    read = [leaf for leaf in leaves.leaves.values() if leaf.name in needed]
    for leaf in read:
        if leaf.live:
            body.append(f"    {leaf.name} = {leaf.read}.tolist()")
        else:
            body.append(f"    {leaf.name} = {leaf.read}.ravel().tolist()")
            body.append(f"    if len({leaf.name}) != {leaf.size}:")
            body.append("        raise StaleProgram")
    body += statements
    for key, values in writes.items():
        body.append(f"    _w.state[{key!r}].reshape(-1)[:] = [" + ", ".join(map(value, values)) + "]")
    returned = ", ".join("[" + ", ".join(map(value, values)) + "]" for values in outputs)
    body.append(f"    return ({returned},)" if len(outputs) == 1 else f"    return ({returned})")
    return "\n".join(body) + "\n", len(kept), len(read)


class CompiledGroups:
    """The groups of terms of one world (a :class:`~robolearn.tasks.core.TaskEnvView` on the
    host), each compiled at its first run; a group the recorder cannot follow, or that the cost
    model finds no faster, stays on arrays (``run`` returns None and the caller computes it)."""

    def __init__(self, owner: Any, enabled: bool, label: str) -> None:
        self.owner, self.enabled, self.label = owner, enabled, label
        self.programs: dict[str, Program | None] = {}
        """Each group run so far: its program, or None where it stays on arrays."""

    def run(
        self, group: str, record: Callable[[Any, Any], Sequence[Any]], argument: Any = None
    ) -> tuple[list[Any], ...] | None:
        """The outputs of ``group``'s compiled terms on the owner's current state, or None."""
        if not self.enabled:
            return None
        program = self.programs.get(group, _UNCOMPILED)
        if program is _UNCOMPILED:
            program = self._compile(group, record, argument)
        if program is None:
            return None
        try:
            return program.fn(self.owner, argument)
        except StaleProgram:  # raised before anything is written
            log.debug("%s: an array its %s terms read changed size: back to arrays", self.label, group)
            self.programs[group] = None
            return None

    def _compile(
        self, group: str, record: Callable[[Any, Any], Sequence[Any]], argument: Any
    ) -> Program | None:
        program = None
        try:
            program = compile_group(self.owner, f"{self.label} {group}", record, argument)
        except Exception as exc:  # the array path runs the terms next: a bug raises there
            log.debug("%s: its %s terms stay on arrays: %s", self.label, group, exc)
        if program is not None and not program.faster_than_arrays:
            log.debug("%s: its %s terms stay on arrays, the faster here", self.label, group)
            program = None
        self.programs[group] = program
        return program


_UNCOMPILED: Any = object()
"""A group not run yet (:meth:`CompiledGroups.run`)."""
