"""The Jinja2 sandbox prompts render in: no Python objects reached, and nothing made that is big.

A stored pipeline may carry its own template text, so a template is hostile until shown
otherwise. A trace function stops template code that runs too long, but it cannot interrupt
one C call, and a single ``x ** y``, ``'s'.ljust(n)`` or ``'%9999999d' % 1`` is one C call
that can take minutes or gigabytes. So every operation that can make a large value from
small text is bounded *before* it runs, from the sizes of its operands:

- ``**``, ``*``, ``+``, ``%`` and ``~`` (the operators, intercepted);
- method calls on built-in values: a list of methods that never grow their input, plus
  ``ljust``/``rjust``/``center``/``zfill``, ``replace`` and ``join`` with their result's size
  worked out first; any other (``expandtabs``, ``translate``, ``format``) is refused;
- filters: those that take a width (``center``, ``indent``, ``wordwrap``, ``format``) or pad
  (``batch``, ``slice``) are gone, ``join`` and ``replace`` are bounded as above, and every
  filter's inputs are bounded;
- the ``sum`` filter adds numbers only: a list or tuple ``start`` concatenates, one C call
  whose time grows with the square of the items;
- what a template outputs, before it becomes text.

A class is never reached through: an attribute of a type (``dict.fromkeys``), or a method bound
to one (``{}.fromkeys``), is an alternate constructor or unbound method, one C call that
nothing above weighs.

A refusal is a ``SecurityError``; ``render`` turns it into a 400. What none of this
foresees (one more long C call) would still hold this process's interpreter lock: an override
therefore renders in its own process, capped in memory and wall time (``prompt_worker``).
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
import types
from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from contextvars import ContextVar
from functools import wraps
from typing import Any

import jinja2
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.filters import sync_do_sum
from jinja2.nodes import Concat
from jinja2.sandbox import ImmutableSandboxedEnvironment

from answerbox.core.errors import ConfigError

__all__ = [
    "MAX_VALUE_CHARS",
    "RENDER_BUDGET_S",
    "BoundedSandbox",
    "budget_of",
    "prompt_environment",
    "render",
    "request_render_budget",
    "spend",
]

# The largest string, sequence or rendered value a template may make: a prompt's own limit.
MAX_VALUE_CHARS = 200_000
# The largest integer: ample for any arithmetic a prompt does, and quick to print.
MAX_INT_BITS = 4096
RENDER_BUDGET_S = 0.2  # a real prompt renders in well under a millisecond
# What a template's own code may get wrong: each is the template's fault, never the server's.
_TEMPLATE_FAULTS = (
    ArithmeticError,
    LookupError,
    RecursionError,
    TypeError,
    ValueError,
    jinja2.TemplateError,
    MemoryError,
)

# Methods of str, list, tuple and dict whose result is no larger than the value they are
# called on (or is a number, or a bool).
_NON_GROWING = frozenset(
    {
        "capitalize", "casefold", "count", "endswith", "find", "index", "isalnum", "isalpha", "isascii",
        "isdecimal", "isdigit", "isidentifier", "islower", "isnumeric", "isprintable", "isspace", "istitle",
        "isupper", "lower", "lstrip", "partition", "removeprefix", "removesuffix", "rfind", "rindex",
        "rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title",
        "upper", "get", "items", "keys", "values",
    }
)  # fmt: skip
_PADDING = frozenset({"ljust", "rjust", "center", "zfill"})
_BUILTIN_VALUES = (str, list, tuple, dict)
# Filters that take a width or pad a sequence to a length: their output is not bounded by
# their input. ``lipsum`` (a global) writes as many paragraphs as it is asked for.
_REMOVED_FILTERS = ("batch", "center", "format", "indent", "slice", "wordwrap")
# %-format specs: a width or precision is a number, or ``*`` (taken from the arguments).
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")


class RenderTimeout(Exception):
    """Template code ran past its CPU budget."""


class _RequestBudget:
    def __init__(self, seconds: float) -> None:
        self.left = seconds


# The CPU seconds the running request's renders have left together: one _msearch of many
# lines, each with many prompts, must not render for each as long as one may.
_REQUEST_BUDGET: ContextVar[_RequestBudget | None] = ContextVar("render_budget", default=None)


@contextlib.contextmanager
def request_render_budget(seconds: float) -> Iterator[None]:
    """Every render inside (this task's and the tasks it starts) shares ``seconds`` of CPU."""
    token = _REQUEST_BUDGET.set(_RequestBudget(seconds))
    try:
        yield
    finally:
        _REQUEST_BUDGET.reset(token)


def budget_of(seconds: float) -> float:
    """``seconds``, or what is left of the running request's render budget where that is less."""
    request = _REQUEST_BUDGET.get()
    return seconds if request is None else min(seconds, request.left)


def spend(seconds: float) -> None:
    """Count ``seconds`` of rendering (here, or in the prompt worker) against the running request's budget."""
    request = _REQUEST_BUDGET.get()
    if request is not None:
        request.left -= seconds


@contextlib.contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Stop the template code running in this thread once it has used ``seconds`` of CPU, or
    what is left of its request's render budget, whichever is less.

    Compiled templates are Python: a trace function sees each line they run and raises
    there, which no template loop can avoid. CPU time of this thread, not wall time: on a
    busy machine a prompt may wait for the CPU longer than it takes to render. The previous
    trace function comes back after."""
    seconds = budget_of(seconds)
    started = time.thread_time()
    deadline = started + seconds

    def check(frame: types.FrameType, event: str, arg: Any) -> Any:
        if time.thread_time() > deadline:
            raise RenderTimeout
        return check

    previous = sys.gettrace()
    sys.settrace(check)
    try:
        if seconds <= 0:
            raise RenderTimeout
        yield
    finally:
        sys.settrace(previous)
        spend(time.thread_time() - started)


def _weight(value: Any, seen: dict[int, int] | None = None) -> int:
    """About how many characters ``value`` renders to. A value that holds the same object
    many times counts it each time (that is what printing it makes), but sizes it once."""
    if isinstance(value, str | bytes):
        return len(value)
    if isinstance(value, bool) or value is None:
        return 5
    if isinstance(value, int):
        return value.bit_length() // 3 + 1
    if not isinstance(value, list | tuple | set | frozenset | dict | KeysView | ValuesView | ItemsView):
        return 16
    seen = {} if seen is None else seen
    if id(value) not in seen:
        seen[id(value)] = 0  # a container that holds itself prints as [...]
        items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        seen[id(value)] = sum(_weight(item, seen) + 2 for item in items) + 2
    return seen[id(value)]


def _check(size: int, what: str) -> None:
    if size > MAX_VALUE_CHARS:
        raise SecurityError(f"{what} would make about {size} characters, above {MAX_VALUE_CHARS}")


def _check_bits(bits: int, what: str) -> None:
    if bits > MAX_INT_BITS:
        raise SecurityError(f"{what} would make a {bits}-bit number, above {MAX_INT_BITS} bits")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_binop(op: str, left: Any, right: Any) -> None:
    if op == "**" and _is_int(left) and _is_int(right) and right > 0:
        _check_bits(max(left.bit_length(), 1) * right, f"{left.bit_length()}-bit ** {right}")
    elif op == "*" and _is_int(left) and _is_int(right):
        _check_bits(left.bit_length() + right.bit_length(), "multiplying")
    elif op == "*":
        for sequence, times in ((left, right), (right, left)):
            if _is_int(times) and not _is_int(sequence):
                _check(_weight(sequence) * max(times, 0), f"repeating a value {times} times")
    elif op == "+" and not (_is_int(left) or _is_int(right)):
        _check(_weight(left) + _weight(right), "adding")
    elif op == "%" and isinstance(left, str):
        _check_percent(left, right)


def _check_percent(template: str, args: Any) -> None:
    for match in _PERCENT_SPEC.finditer(template):
        for number in match.groups():
            if number == "*":
                raise SecurityError("a '*' width in %-formatting is not allowed")
            if number is not None:
                _check(int(number), f"a %-format width of {number}")
    _check(len(template) + _weight(args), "%-formatting")


def _check_method(method: Any, args: tuple[Any, ...]) -> None:
    name: str = method.__name__
    owner = method.__self__
    if name in _NON_GROWING:
        return
    if name in _PADDING and args and _is_int(args[0]):
        _check(args[0], f"{name}({args[0]})")
    elif name == "replace" and isinstance(owner, str) and len(args) >= 2 and all(isinstance(a, str) for a in args[:2]):
        _check(_replaced_size(owner, args[0], args[1], args[2] if len(args) > 2 else -1), "replace()")
    elif name == "join" and isinstance(owner, str) and args:
        _check(_joined_size(owner, args[0]), "join()")
    else:
        raise SecurityError(f"the method {type(owner).__name__}.{name}() is not available in prompts")


def _replaced_size(text: str, old: str, new: str, count: Any) -> int:
    found = text.count(old) if old else len(text) + 1
    if _is_int(count) and count >= 0:
        found = min(found, count)
    return len(text) + found * max(len(new) - len(old), 0)


def _joined_size(separator: str, items: Any) -> int:
    if not isinstance(items, list | tuple):
        raise SecurityError("join() takes a list here")
    return _weight(items) + len(separator) * len(items)


@jinja2.pass_environment
def _sum_of_numbers(
    environment: jinja2.Environment, iterable: Iterable[Any], attribute: str | int | None = None, start: Any = 0
) -> Any:
    """``sum`` with a number to start from: items that are not numbers then fail at the first one."""
    if not isinstance(start, int | float):
        raise SecurityError("the filter sum adds numbers only")
    return sync_do_sum(environment, iterable, attribute, start)


def _bounded_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` with its inputs bounded first; ``join`` and ``replace`` with their results."""

    # A filter marked pass_context (or eval_context, environment) gets that first.
    skip = 1 if getattr(function, "jinja_pass_arg", None) is not None else 0

    @wraps(function)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        if name == "join" and len(args) > skip and not isinstance(args[skip], list | tuple):
            # Joined items are counted first, so a generator (``map``) is read once, here.
            args = (*args[:skip], list(args[skip]), *args[skip + 1 :])
        values = [*args[skip:], *kwargs.values()]
        _check(sum(_weight(v) for v in values), f"the filter {name}'s input")
        if name == "replace" and len(values) >= 3 and all(isinstance(v, str) for v in values[:3]):
            count = values[3] if len(values) > 3 else -1
            _check(_replaced_size(values[0], values[1], values[2], count), "the filter replace")
        if name == "join" and values:
            separator = values[1] if len(values) > 1 and isinstance(values[1], str) else ""
            _check(_joined_size(separator, values[0]), "the filter join")
        return function(*args, **kwargs)

    return bounded


class _BoundedCodeGenerator(CodeGenerator):
    """Compiles ``a ~ b`` to a call the sandbox bounds, instead of a plain join."""

    def visit_Concat(self, node: Concat, frame: Frame) -> None:
        self.write("environment.bounded_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """Jinja2's immutable sandbox with every operation bounded by the size of what it makes.

    ``loader`` is given for the shipped templates only: an override (a pipeline's own text)
    is compiled by an environment without one, so it can include, import or extend nothing."""

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, loader: jinja2.BaseLoader | None = None) -> None:
        super().__init__(loader=loader, undefined=jinja2.StrictUndefined, autoescape=False, finalize=self._finalize)
        for name in _REMOVED_FILTERS:
            del self.filters[name]
        self.globals.pop("lipsum", None)
        self.filters["sum"] = _sum_of_numbers
        self.filters = {name: _bounded_filter(name, function) for name, function in self.filters.items()}

    @staticmethod
    def _finalize(value: Any) -> Any:
        _check(_weight(value), "an output")
        return value

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if isinstance(obj, type) or isinstance(getattr(value, "__self__", None), type):
            return False
        return bool(super().is_safe_attribute(obj, attr, value))

    def bounded_concat(self, values: tuple[Any, ...]) -> str:
        _check(sum(_weight(v) for v in values), "joining with ~")
        return "".join(map(str, values))

    def call_binop(self, context: jinja2.runtime.Context, operator_: str, left: Any, right: Any) -> Any:
        # Interception also keeps these from being folded at compile time.
        _check_binop(operator_, left, right)
        return super().call_binop(context, operator_, left, right)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        if (
            isinstance(value, types.BuiltinMethodType)
            and value.__name__ in ("format", "format_map")
            and isinstance(value.__self__, str)
        ):
            raise SecurityError("str.format is not available in prompts; join with ~")
        return None

    def call(__self, __context: jinja2.runtime.Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(__obj, types.BuiltinMethodType) and isinstance(getattr(__obj, "__self__", None), _BUILTIN_VALUES):
            if __obj.__name__ == "join" and args and not isinstance(args[0], list | tuple):
                args = (list(args[0]), *args[1:])  # counted first, so a generator is read once
            _check_method(__obj, args + tuple(kwargs.values()))
        return super().call(__context, __obj, *args, **kwargs)


def prompt_environment(loader: jinja2.BaseLoader | None = None) -> BoundedSandbox:
    """The sandbox prompts compile in, in the server and in the prompt worker. ``loader`` is for
    the shipped templates: a pipeline's own text includes, imports and extends nothing."""
    environment = BoundedSandbox(loader)
    # Text from documents (and from the reader's spans) goes into prompts through this filter:
    # on one line, it cannot start a line that poses as a new block, a question or an answer
    # of the prompt's own format.
    environment.filters["oneline"] = lambda text: " ".join(str(text).split())
    return environment


def render(name: str, template: jinja2.Template, variables: Mapping[str, Any]) -> str:
    """``template`` (the prompt ``name``) rendered in this process, within its limits: what
    fails is a ConfigError that names the prompt (``Prompt.render``, and the prompt worker's)."""
    chunks: list[str] = []
    size = 0
    try:
        with time_budget(RENDER_BUDGET_S):
            for chunk in template.generate(**variables):
                size += len(chunk)
                if size > MAX_VALUE_CHARS:
                    raise ConfigError(f"prompt [{name}] renders to more than {MAX_VALUE_CHARS} characters")
                chunks.append(chunk)
    except jinja2.UndefinedError as exc:
        raise ConfigError(f"prompt [{name}]: {exc.message}") from exc
    except SecurityError as exc:
        raise ConfigError(f"prompt [{name}] was refused: {exc}") from exc
    except RenderTimeout:
        raise ConfigError(
            f"prompt [{name}] ran out of CPU time to render ({RENDER_BUDGET_S:g}s a prompt, "
            f"limits.render_budget_s a request)"
        ) from None
    except _TEMPLATE_FAULTS as exc:
        raise ConfigError(f"prompt [{name}] failed to render: {type(exc).__name__}") from None
    return "".join(chunks).strip()
