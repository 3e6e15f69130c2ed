"""`check --deploy`'s middleware checks, for our own middleware classes.

Django's security checks W001-W003 look for its middleware by dotted path, so our subclasses
(chatapp.middleware: the same classes, run on the event loop) fail them whatever MIDDLEWARE
holds. settings silences those three and this check asks the question they meant: is a subclass
of each in MIDDLEWARE?
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Tags, Warning, register
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.csrf import CsrfViewMiddleware
from django.middleware.security import SecurityMiddleware
from django.utils.module_loading import import_string

REQUIRED = {
    "chatapp.W001": SecurityMiddleware,
    "chatapp.W002": XFrameOptionsMiddleware,
    "chatapp.W003": CsrfViewMiddleware,
}


@register(Tags.security, deploy=True)
def required_middleware(**kwargs: Any) -> list[CheckMessage]:
    classes = [import_string(path) for path in settings.MIDDLEWARE]
    return [
        Warning(
            f"No subclass of {required.__module__}.{required.__qualname__} is in MIDDLEWARE.",
            id=check_id,
        )
        for check_id, required in REQUIRED.items()
        if not any(isinstance(c, type) and issubclass(c, required) for c in classes)
    ]
