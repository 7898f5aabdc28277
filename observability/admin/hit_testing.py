"""The hit testing page's admin entry; the page itself is the retrieval app's (retrieval/staff/hit_testing.py)."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext_lazy as _

from observability.admin.base import _PageAdmin
from observability.models import HitTest


@admin.register(HitTest)
class HitTestAdmin(_PageAdmin):
    page_name = _("Hit testing")

    def changelist_view(self, request, extra_context=None):
        from retrieval.staff.hit_testing import hit_test_page

        if not self.has_view_permission(request):
            raise PermissionDenied
        return hit_test_page(request, self.page_context(request))
