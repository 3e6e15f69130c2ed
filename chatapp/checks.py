"""`check --deploy`'s security checks, for our own middleware classes.

Django's security checks look for its middleware by dotted path, so our subclasses
(chatapp.patches.inline_middleware: the same classes, run on the event loop) fool them both ways:
W001-W003 ("is it installed?") fail whatever MIDDLEWARE holds, and every check of a setting that
matters only with the middleware installed (HSTS W004, the HTTPS redirect W008, secure cookies W012
and W016, ...) passes whatever the setting says. So settings silences W001-W003 and
`required_middleware` asks the question they meant (is a subclass of each in MIDDLEWARE?), and
`django_security_checks` runs Django's own security checks again with MIDDLEWARE as Django would
spell it (each subclass by the path of the Django class it extends), reporting what they find there
and not as they ran: exactly as strict as stock Django, under Django's own IDs.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Tags, Warning, register
from django.core.checks.registry import registry
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.csrf import CsrfViewMiddleware
from django.middleware.security import SecurityMiddleware
from django.test.utils import override_settings
from django.utils.deprecation import MiddlewareMixin
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


def stock_middleware() -> list[str]:
    """MIDDLEWARE with each of our subclasses named by the Django middleware it extends."""
    paths = []
    for path in settings.MIDDLEWARE:
        cls = import_string(path)
        stock = next(
            (
                f"{base.__module__}.{base.__qualname__}"
                for base in getattr(cls, "__mro__", ())
                if base.__module__.startswith("django.") and base is not MiddlewareMixin
            ),
            path,
        )
        paths.append(stock)
    return paths


@register(Tags.security, deploy=True)
def django_security_checks(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    checks = [
        check
        for check in registry.get_checks(include_deployment_checks=True)
        if Tags.security in getattr(check, "tags", ()) and check.__module__.startswith("django.")
    ]

    def run() -> list[CheckMessage]:
        found: list[CheckMessage] = []
        for check in checks:
            found += check(app_configs=app_configs, databases=kwargs.get("databases"))
        return found

    as_ran = run()
    with override_settings(MIDDLEWARE=stock_middleware()):
        as_meant = run()
    presence = {f"security.{check_id.split('.')[1]}" for check_id in REQUIRED}
    return [m for m in as_meant if m not in as_ran and m.id not in presence]
