"""Forms of the observability pages: dashboard filters, threshold application, feedback."""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from config.display import display_text
from knowledge.models import KnowledgeDomain
from observability.rollups import NO_AGENT
from observability.selectors import LOOKUP_TOOL, InvocationFilter, agents_with_calls, tool_names

RANGES = {
    "1h": (_("Last hour"), timedelta(hours=1)),
    "24h": (_("Last day"), timedelta(days=1)),
    "7d": (_("Last 7 days"), timedelta(days=7)),
    "30d": (_("Last 30 days"), timedelta(days=30)),
    "custom": (_("Custom"), None),
}
ALL_TOOLS = "__all__"
MAX_CUSTOM_RANGE = timedelta(days=366)
# An agent's name as a filter choice: clipped, so a hostile name cannot widen the toolbar.
AGENT_CHOICE_CHARS = 30


def agent_label(name: str) -> str:
    text = display_text(name)
    return text if len(text) <= AGENT_CHOICE_CHARS else text[: AGENT_CHOICE_CHARS - 1] + "…"


class DashboardFilterForm(forms.Form):
    range = forms.ChoiceField(
        label=_("Range"), choices=[(k, v[0]) for k, v in RANGES.items()], required=False, initial="24h"
    )
    start = forms.DateTimeField(
        label=_("Start"),
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )
    end = forms.DateTimeField(
        label=_("End"),
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )
    tool = forms.ChoiceField(label=_("Tool"), required=False, initial=LOOKUP_TOOL)
    domain = forms.ChoiceField(label=_("Domain"), required=False)
    agent = forms.TypedChoiceField(label=_("Agent"), required=False, coerce=int, empty_value=None)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        tools = sorted(set(tool_names()) | {LOOKUP_TOOL})
        self.fields["tool"].choices = [(t, t) for t in tools] + [(ALL_TOOLS, _("all tools"))]
        domains = KnowledgeDomain.objects.order_by("domain_id").values_list("domain_id", flat=True)
        self.fields["domain"].choices = [("", _("all domains"))] + [(d, d) for d in domains]
        self.fields["agent"].choices = (
            [("", _("all agents"))]
            + [(str(pk), agent_label(name)) for pk, name in agents_with_calls()]
            + [(str(NO_AGENT), _("no agent (command line, stdio MCP)"))]
        )

    def clean(self):
        cleaned = super().clean()
        choice = cleaned.get("range") or "24h"
        now = timezone.now()
        if choice == "custom":
            start, end = cleaned.get("start"), cleaned.get("end")
            if start is None:
                self.add_error("start", _("A custom range needs a start."))
            if end is None:
                self.add_error("end", _("A custom range needs an end."))
            if start and end:
                if start >= end:
                    self.add_error("end", _("The end must come after the start."))
                elif end - start > MAX_CUSTOM_RANGE:
                    self.add_error("start", _("A custom range spans at most 366 days."))
        else:
            cleaned["end"] = now
            cleaned["start"] = now - RANGES[choice][1]
        cleaned["range"] = choice
        return cleaned

    def filters(self) -> InvocationFilter:
        """The selectors' filter; call after ``is_valid()``."""
        tool = self.cleaned_data.get("tool") or LOOKUP_TOOL
        return InvocationFilter(
            start=self.cleaned_data["start"],
            end=self.cleaned_data["end"],
            tool_name=None if tool == ALL_TOOLS else tool,
            domain=self.cleaned_data.get("domain") or None,
            agent=self.cleaned_data.get("agent"),
        )


class ThresholdApplyForm(forms.Form):
    reference_threshold = forms.FloatField(label=_("REFERENCE threshold"), min_value=0.0, max_value=1.0)
    highly_relevant_threshold = forms.FloatField(
        label=_("HIGHLY_RELEVANT threshold"), min_value=0.0, max_value=1.0
    )
    note = forms.CharField(
        label=_("Note"), required=False, max_length=500, widget=forms.TextInput(attrs={"size": 50})
    )
    confirm = forms.BooleanField(
        required=True, label=_("I understand lookups use these thresholds from now on")
    )

    def clean(self):
        cleaned = super().clean()
        ref, hr = cleaned.get("reference_threshold"), cleaned.get("highly_relevant_threshold")
        if ref is not None and hr is not None and ref > hr:
            self.add_error("reference_threshold", _("Must not exceed the HIGHLY_RELEVANT threshold."))
        return cleaned


class FeedbackForm(forms.Form):
    helpful = forms.TypedChoiceField(
        choices=[("1", "helpful"), ("0", "not helpful")], coerce=lambda v: v == "1"
    )
    comment = forms.CharField(required=False, max_length=2000)
