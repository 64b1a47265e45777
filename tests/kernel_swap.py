"""The one way tests and benchmarks run the library on a plain reference instead of a kernel.

The library runs its kernels only (no ``engine=`` or ``use_kernel=`` switch). Each kernel's
plain reference lives in ``tests/<topic>_reference.py``; its ``plain()`` context manager puts
the references in place of the kernels (module attributes, looked up at call time) with
``swapped``, so a public function such as ``tiles.profile`` runs end to end on the references
and can be compared with its normal result.
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from unittest import mock


def filling(reference, n_out: int):
    """A kernel-shaped wrapper of ``reference``: a kernel takes its ``n_out`` output arrays
    last and fills them; ``reference`` returns them (the array itself when ``n_out`` is 1).
    Values are copied unchanged (same dtype)."""

    def kernel(*args):
        outs = args[-n_out:]
        got = reference(*args[:-n_out])
        for out, value in zip(outs, (got,) if n_out == 1 else got, strict=True):
            out[...] = value

    return kernel


@contextmanager
def swapped(replacements, on_enter=None):
    """Replace ``(module, name) -> function`` for the duration; ``on_enter`` (e.g. a cache
    clear) runs on entry and on exit. A missing name is an ``AttributeError``, so a renamed
    kernel fails the tests instead of silently running itself."""
    with ExitStack() as stack:
        for (module, name), fn in replacements.items():
            getattr(module, name)  # the kernel must exist under this name
            stack.enter_context(mock.patch.object(module, name, fn))
        if on_enter is not None:
            on_enter()
            stack.callback(on_enter)
        yield
