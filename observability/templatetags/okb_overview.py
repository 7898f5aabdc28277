"""``{% okb_overview as overview %}``: the admin home's figures (observability.overview)."""

from django import template

from observability.overview import admin_overview

register = template.Library()


@register.simple_tag(takes_context=True)
def okb_overview(context):
    user = context.get("user")
    return admin_overview() if user is not None and user.is_staff else None
