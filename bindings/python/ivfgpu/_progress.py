"""Progress reporting and cancellation of long calls (ivf_params_set_progress).

Train, add, search, load and deserialize take ``progress=``, a callable
``progress(stage, fraction)`` called on the calling thread while the call runs (the GIL is
released in between): at the start (0.0), about every 50 ms, and at the end (1.0, before a
mutation is published). Returning ``False`` cancels the call (``CancelledError``, nothing
changed); ``None`` (no return statement) or ``True`` continue. An exception raised by the
callable cancels the call too and is raised again once the call has returned.

Ctrl-C: a KeyboardInterrupt cannot simply be raised inside a ctypes callback, because ctypes
prints and drops an exception that escapes the callback, and Python delivers a pending signal
at the first bytecode of the callback, before any ``try`` in it can catch it. So for the
duration of a call made on the main thread, while SIGINT has Python's default handler, the
handler is swapped for one that only records the signal; the callback sees the record and
cancels the call, the handler is put back, and the call raises KeyboardInterrupt.
"""
from __future__ import annotations

import ctypes
import threading
from enum import IntEnum
from typing import Any, Callable, Dict, Optional, Union

from . import _lib
from ._errors import CancelledError, IvfError, check

try:  # the C module: the signal module's wrappers (enum conversions) cost ~4x more per call
    import _signal as _sig
except ImportError:  # pragma: no cover - not CPython
    import signal as _sig  # type: ignore[no-redef]


class Stage(IntEnum):
    """ivf_progress_stage: the call a progress report is about. Compares equal to its int
    value and to its name ("train", "add", "load", "search")."""
    TRAIN = _lib.IVF_PROGRESS_TRAIN
    ADD = _lib.IVF_PROGRESS_ADD
    LOAD = _lib.IVF_PROGRESS_LOAD
    SEARCH = _lib.IVF_PROGRESS_SEARCH

    @property
    def label(self) -> str:
        return self.name.lower()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return other.lower() == self.label
        return int(self) == other

    __hash__ = IntEnum.__hash__

    def __str__(self) -> str:
        return self.label


ProgressCallable = Callable[[Stage, float], Optional[bool]]


# --- SIGINT: recorded, not raised, while a call runs on the main thread --------------------

class _SigintState:
    depth = 0          # nested calls on the main thread with our handler installed
    pending = False    # a SIGINT arrived and was not yet turned into KeyboardInterrupt


_SIGINT = _SigintState()


def _record_sigint(signum: int, frame: Any) -> None:
    _SIGINT.pending = True


def _sigint_enter() -> bool:
    """Install the recording handler (or join one installed by an outer call); False when the
    call cannot be interrupted by Ctrl-C (not the main thread, or SIGINT is not Python's
    default handler)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if _SIGINT.depth == 0:
        try:
            if _sig.getsignal(_sig.SIGINT) is not _sig.default_int_handler:
                return False
            _sig.signal(_sig.SIGINT, _record_sigint)
        except (ValueError, OSError):  # e.g. a subinterpreter
            return False
        _SIGINT.pending = False
    _SIGINT.depth += 1
    return True


def _sigint_exit() -> None:
    _SIGINT.depth -= 1
    if _SIGINT.depth == 0 and _sig.getsignal(_sig.SIGINT) is _record_sigint:
        _sig.signal(_sig.SIGINT, _sig.default_int_handler)


def _take_sigint() -> bool:
    """Whether a SIGINT arrived (running the Python-level handlers of pending signals first)."""
    _check_signals()
    if _SIGINT.pending:
        _SIGINT.pending = False
        return True
    return False


_pyerr_check_signals = ctypes.pythonapi.PyErr_CheckSignals
_pyerr_check_signals.argtypes = []
_pyerr_check_signals.restype = ctypes.c_int


def _check_signals() -> None:
    # Runs the pending signal handlers now (ours only records); one that raises (another
    # signal's handler) raises here, inside the callback's try.
    _pyerr_check_signals()


# --- the callback ------------------------------------------------------------------------

_calls: Dict[int, "ProgressCall"] = {}   # the calls in flight, by key (the C user pointer)
_next_key = 0
_key_lock = threading.Lock()


def _trampoline(stage: int, fraction: float, user: Optional[int]) -> int:
    call = _calls.get(user or 0)
    if call is None:
        return 1
    return call._report(stage, fraction)


_TRAMPOLINE = _lib.PROGRESS_FN(_trampoline)  # one C thunk for every call, alive forever


class ProgressCall:
    """The progress callback of one C call: the caller's callable, if any, and Ctrl-C.

        with ProgressCall(progress) as pc:
            params = ... (created when pc.active and there were none)
            pc.attach(lib, params_ptr)
            status = lib.ivf_x(..., params_ptr, ...)
            pc.check(status, "ivf_x")

    Inactive (no callback set at all) when there is no callable and Ctrl-C cannot reach the
    call (another thread, or SIGINT not handled by Python's default handler).
    """

    def __init__(self, progress: Optional[ProgressCallable]) -> None:
        if progress is not None and not callable(progress):
            raise TypeError(f"progress: expected a callable, got {type(progress).__name__}")
        self._fn = progress
        self._sigint = False
        self._key = 0
        self._exc: Optional[BaseException] = None
        self._interrupted = False

    @property
    def active(self) -> bool:
        return self._fn is not None or self._sigint

    def __enter__(self) -> "ProgressCall":
        global _next_key
        self._sigint = _sigint_enter()
        if self.active:
            with _key_lock:
                _next_key += 1
                self._key = _next_key
            _calls[self._key] = self
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._key:
            _calls.pop(self._key, None)
        if self._sigint:
            self._sigint = False
            try:
                # A SIGINT that came after the call's last report (or before it started) is
                # still a KeyboardInterrupt: raised now, as Python's own handler would have.
                interrupted = _take_sigint()
            finally:
                _sigint_exit()
            if interrupted and not isinstance(exc, KeyboardInterrupt):
                raise KeyboardInterrupt

    def attach(self, lib: ctypes.CDLL, params: Optional[int]) -> None:
        """Set the callback on params (an ivf_params*, not None when active)."""
        if self.active:
            assert params is not None
            check(lib.ivf_params_set_progress(params, _TRAMPOLINE, self._key),
                  "ivf_params_set_progress")

    def _report(self, stage: int, fraction: float) -> int:
        # Runs with the GIL, on the calling thread, inside the C call. Nothing may escape.
        try:
            if self._exc is not None or self._interrupted:
                return 1
            if self._sigint and _take_sigint():
                self._interrupted = True
                return 1
            if self._fn is not None:
                try:
                    st: Union[Stage, int] = Stage(stage)
                except ValueError:  # a stage of a newer library
                    st = stage
                r = self._fn(st, fraction)  # type: ignore[arg-type]
                if r is not None and not r:
                    return 1
                if self._sigint and _take_sigint():  # e.g. the callable slept through Ctrl-C
                    self._interrupted = True
                    return 1
            return 0
        except BaseException as e:  # noqa: B036 - KeyboardInterrupt and SystemExit included
            self._exc = e
            return 1

    def check(self, status: int, function: str) -> None:
        """check(status, function), except that an exception of the callable, or Ctrl-C, is
        raised instead of the CancelledError it caused. Call it right after the C call."""
        error: Optional[IvfError] = None
        try:
            check(status, function)  # first: it reads the thread's last error message
        except IvfError as e:
            error = e
        if self._exc is not None:
            exc, self._exc = self._exc, None
            raise exc
        if self._interrupted:
            self._interrupted = False
            raise KeyboardInterrupt
        if error is not None:
            raise error


__all__ = ["Stage", "ProgressCall", "ProgressCallable", "CancelledError"]
