"""The package's public names, and its independence from Django."""

from __future__ import annotations

import subprocess
import sys

import gateway_client


def test_public_names() -> None:
    assert sorted(gateway_client.__all__) == [
        "Accumulator",
        "Completion",
        "ConnectError",
        "Embeddings",
        "ErrorInfo",
        "EventStream",
        "EventStreamParser",
        "GatewayClient",
        "GatewayError",
        "GatewayTimeout",
        "GenerationRecord",
        "InBandError",
        "IncompleteStream",
        "LimitExceeded",
        "Limits",
        "ModelInfo",
        "ProtocolError",
        "RetryBudget",
        "SSEDecoder",
        "ServerSentEvent",
        "SpeechStream",
        "StatusError",
        "StreamFailed",
        "Timeouts",
        "ToolCall",
        "Transcription",
        "TransportError",
    ]
    for name in gateway_client.__all__:
        assert getattr(gateway_client, name) is not None


def test_errors_form_one_hierarchy() -> None:
    from gateway_client import errors

    for name in errors.__all__:
        kind = getattr(errors, name)
        if isinstance(kind, type) and issubclass(kind, Exception):
            assert issubclass(kind, errors.GatewayError)


def test_importing_the_whole_package_does_not_import_django() -> None:
    code = (
        "import sys, pkgutil, importlib, gateway_client\n"
        "for m in pkgutil.walk_packages(gateway_client.__path__, 'gateway_client.'):\n"
        "    if not m.name.endswith('__main__'): importlib.import_module(m.name)\n"
        "assert not [n for n in sys.modules if n == 'django' or n.startswith('django.')]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
