"""Silence one known, harmless traceback of PyFlink's local (loopback) execution.

When a job run from this process ends, Beam's gRPC reader thread sees its stream cancelled
("Multiplexer hanging up") and prints the exception, although the job succeeded. Only that
exact case is hidden; every other thread exception is reported as usual.
"""

from __future__ import annotations

import threading

_installed = False


def hide_beam_shutdown_noise() -> None:
    global _installed
    if _installed:
        return
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        thread_name = args.thread.name if args.thread is not None else ""
        if thread_name == "read_grpc_client_inputs" and "CANCELLED" in str(args.exc_value):
            return
        previous(args)

    threading.excepthook = hook
    _installed = True
