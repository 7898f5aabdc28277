"""Template filters for showing stored agent input on staff pages (config.display)."""

from django import template

from config.display import clipped, display_text

register = template.Library()


@register.filter
def clip(value, limit=60):
    """``{{ value|clip:60 }}``: the first characters, the whole text on hover."""
    return clipped(value, int(limit))


@register.filter
def as_text(value):
    """``{{ value|as_text }}``: any stored value as safe printable text."""
    return display_text(value)
