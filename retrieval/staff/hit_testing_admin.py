"""The hit testing page's admin entry, beside observability's pages (its model, ``HitTest``, is an
entry of theirs); the page is ``retrieval.staff.hit_testing``."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext_lazy as _

from observability.admin.base import PageAdmin
from observability.models import HitTest
from retrieval.staff.hit_testing import hit_test_page


@admin.register(HitTest)
class HitTestAdmin(PageAdmin):
    page_name = _("Hit testing")

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_permission(request):
            raise PermissionDenied
        return hit_test_page(request, self.page_context(request))
