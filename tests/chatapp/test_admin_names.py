"""The admin's headings name each model in good English: Django's default plural adds an "s",
which makes "identitys" and "policys" of a name ending in a consonant and "y"."""

from __future__ import annotations

import re

from django.contrib import admin


def test_no_model_in_the_admin_is_named_with_a_default_y_plural() -> None:
    wrong = [
        str(model._meta.verbose_name_plural)
        for model in admin.site._registry
        if re.search(r"[^aeiou]ys$", str(model._meta.verbose_name_plural))
    ]
    assert wrong == []
    names = {str(model._meta.verbose_name_plural) for model in admin.site._registry}
    assert "single sign-on identities" in names
