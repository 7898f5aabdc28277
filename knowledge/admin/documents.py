"""Admin for documents: upload one file (add form) or many (bulk page: files or a .zip), watch
indexing status, retry failures, delete with vectors. Every write goes through the services in
knowledge.services (documents, uploads, reindex); this module only maps forms to them."""

from __future__ import annotations

import json

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import content_disposition_header
from django.utils.text import Truncator
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from knowledge.admin.held_uploads import upload_held, upload_hold, upload_release
from knowledge.admin.status import status_urls
from knowledge.models import ApiDocument, DocumentOriginal
from knowledge.parsing import DocumentParseError, normalise_doc_key, parse_document, validate_domain
from knowledge.selectors import domain_ids_known
from knowledge.services.documents import (
    ADDED,
    FAILED,
    UNCHANGED,
    UPDATED,
    IngestResult,
    document_delete,
    document_ingest,
)
from knowledge.services.reindex import documents_reindex
from knowledge.services.uploads import UploadRejected, documents_upload

_OUTCOME_TEXT = {
    ADDED: _("added"),
    UPDATED: _("updated (re-indexing)"),
    UNCHANGED: _("unchanged (same content, not re-indexed)"),
    FAILED: _("failed"),
}


# --- forms -------------------------------------------------------------------------------------
def _domain_choices() -> list[tuple[str, str]]:
    return [("", _("— from the frontmatter —"))] + [(d, d) for d in domain_ids_known()]


def _domain_field() -> forms.ChoiceField:
    return forms.ChoiceField(
        label=_("Domain"), required=False, help_text=_("Used for files whose frontmatter names no domain.")
    )


def _new_domain_field() -> forms.CharField:
    return forms.CharField(
        label=_("or a new domain"),
        required=False,
        max_length=64,
        help_text=_("Letters, digits, '_', '-' and '.'; overrides the choice above."),
    )


def _chosen_domain(form: forms.BaseForm) -> str | None:
    """The new domain typed in, else the one picked; None when neither (the frontmatter decides)."""
    value = (
        (form.cleaned_data.get("new_domain") or "").strip() or form.cleaned_data.get("domain_choice") or None
    )
    if value:
        try:
            return validate_domain(value)
        except DocumentParseError as exc:
            form.add_error("new_domain", exc.message)
    return None


def _read_limited(upload, *, limit: int, setting: str) -> bytes:
    if upload.size > limit:
        raise forms.ValidationError(
            _("'%(name)s' is %(size)s bytes; the limit is %(limit)s bytes (%(setting)s)."),
            params={
                "name": upload.name,
                "size": f"{upload.size:,}",
                "limit": f"{limit:,}",
                "setting": setting,
            },
        )
    return upload.read()


class HeldFileInput(forms.FileInput):
    """A file input that, after a validation error elsewhere, says which file the server kept
    (``held_uploads``) and carries its token: the next submit may leave the input empty."""

    held: tuple[str, str] | None = None  # (token, file name)

    def render(self, name, value, attrs=None, renderer=None):
        html = super().render(name, value, attrs, renderer)
        if not self.held:
            return html
        token, file_name = self.held
        return html + format_html(
            '<input type="hidden" name="{}-held" value="{}"><p class="help" id="held-file"><strong>{}</strong></p>',
            name,
            token,
            gettext("Kept from your last try: %(name)s. Leave the file empty to use it, or choose another.")
            % {"name": Truncator(file_name).chars(120)},
        )


class DocumentUploadForm(forms.ModelForm):
    """The add form: one file becomes (or replaces) one document.

    A validation error that is not the file's keeps the file on the server (``held_uploads``):
    browsers cannot refill a file input, so the form names the kept file instead.
    """

    #: the staff user the held file belongs to (set per request by ApiDocumentAdmin.get_form)
    held_owner: int | None = None

    file = forms.FileField(
        label=_("File"),
        required=False,  # a held file may stand in for it (checked in clean)
        widget=HeldFileInput,
        help_text=_(
            ".md, .markdown or .txt in UTF-8 or GB18030 (optional YAML frontmatter), or a PDF (with a "
            "text layer), .docx, .pptx, .xlsx, .csv, .html or .htm, converted to Markdown."
        ),
    )
    # Not named after model fields (domain, doc_key): a ModelForm would validate the (empty)
    # instance's fields of those names.
    domain_choice = _domain_field()
    new_domain = _new_domain_field()
    key = forms.CharField(
        label=_("Doc key"),
        required=False,
        max_length=255,
        help_text=_("Defaults to the file name. Uploading an existing doc key replaces that document."),
    )

    class Meta:
        model = ApiDocument
        fields: list[str] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["domain_choice"].choices = _domain_choices()
        self._chosen: tuple[str, bytes] | None = None  # (file name, data) once read
        self._held_token = ""

    def _chosen_file(self, upload) -> tuple[str, bytes] | None:
        """The file of this submit: the one chosen now, else the one held from the last try."""
        if upload is not None:
            try:
                data = _read_limited(
                    upload, limit=settings.INGEST_MAX_FILE_BYTES, setting="INGEST_MAX_FILE_BYTES"
                )
            except forms.ValidationError as exc:
                self.add_error("file", exc)
                return None
            return upload.name, data
        token = self.data.get("file-held", "")
        held = upload_held(owner=self.held_owner, token=token)
        if held is not None:
            self._held_token = token
            return held
        if token:
            self.add_error("file", gettext("The file chosen before is no longer kept: choose it again."))
        else:
            self.add_error("file", self.fields["file"].error_messages["required"])
        return None

    def clean(self):
        cleaned = super().clean()
        domain = _chosen_domain(self)
        if "file" in self.errors:
            return cleaned
        self._chosen = self._chosen_file(cleaned.get("file"))
        if self._chosen is None or self.errors:
            return cleaned
        file_name, data = self._chosen
        name = (cleaned.get("key") or "").strip() or file_name
        try:
            name = normalise_doc_key(name)
            parse_document(data, name=name, domain=domain)
        except DocumentParseError as exc:
            target = {"doc_key": "key", "domain": "domain_choice", "category": "domain_choice"}.get(
                exc.field, "file"
            )
            self.add_error(target, str(exc))
            return cleaned
        cleaned.update(data=data, name=name, chosen_domain=domain, held_token=self._held_token)
        return cleaned

    def full_clean(self):
        super().full_clean()
        if not self.is_bound or not self._errors:
            return
        if self._chosen is None or "file" in self._errors or self.held_owner is None:
            # The file is what was wrong (or there is none): the input asks for one again.
            upload_release(owner=self.held_owner, token=self._held_token)
            return
        file_name, data = self._chosen
        token = self._held_token or upload_hold(owner=self.held_owner, name=file_name, data=data)
        self.fields["file"].widget.held = (token, file_name)

    def held_release(self) -> None:
        """Drop the held file once the document is made from it."""
        upload_release(owner=self.held_owner, token=self._held_token)


class DocumentChangeForm(forms.ModelForm):
    """The change form: replace the file, or edit the planner metadata (covers / when_to_retrieve)."""

    replacement = forms.FileField(
        label=_("Replace with a new version"),
        required=False,
        help_text=_("Same doc key; the old version stays searchable until the new one is indexed."),
    )
    covers = forms.CharField(
        label=_("Covers"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_("Scenarios this document covers, one per line. Edited here it becomes manual."),
    )
    when_to_retrieve = forms.CharField(
        label=_("When to retrieve"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_(
            "Edited here it becomes manual (never regenerated); empty hands it back to the generator."
        ),
    )

    class Meta:
        model = ApiDocument
        fields: list[str] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        metadata = self.instance.metadata if isinstance(self.instance.metadata, dict) else {}
        self.fields["covers"].initial = "\n".join(metadata.get("covers") or [])
        self.fields["when_to_retrieve"].initial = metadata.get("when_to_retrieve") or ""

    def clean(self):
        cleaned = super().clean()
        upload = cleaned.get("replacement")
        if upload is None:
            return cleaned
        try:
            data = _read_limited(
                upload, limit=settings.INGEST_MAX_FILE_BYTES, setting="INGEST_MAX_FILE_BYTES"
            )
            parse_document(data, name=self.instance.doc_key, domain=self.instance.domain)
        except forms.ValidationError as exc:
            self.add_error("replacement", exc)
        except DocumentParseError as exc:
            self.add_error("replacement", str(exc))
        else:
            cleaned["data"] = data
        return cleaned


class MultipleFileInput(forms.ClearableFileInput):
    """Several files; after a validation error that was not theirs, names the files the server
    kept (``held_uploads``) and carries their tokens, as ``HeldFileInput`` does for one file."""

    allow_multiple_selected = True
    held: list[tuple[str, str]] = []  # (token, file name) per kept file

    def render(self, name, value, attrs=None, renderer=None):
        html = super().render(name, value, attrs, renderer)
        if not self.held:
            return html
        names = ", ".join(Truncator(file_name).chars(120) for _token, file_name in self.held)
        return (
            html
            + format_html_join(
                "", '<input type="hidden" name="{}-held" value="{}">', ((name, t) for t, _n in self.held)
            )
            + format_html(
                '<p class="help" id="held-files"><strong>{}</strong></p>',
                gettext(
                    "Kept from your last try: %(names)s. Leave the files empty to upload them, or choose others."
                )
                % {"names": names},
            )
        )


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        # An empty file is that file's refusal (its own row, "file: is empty"), not the form's:
        # a field error would reject every file picked with it, unnamed, and clear the input.
        kwargs.setdefault("allow_empty_file", True)
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, list | tuple):
            return [single(item, initial) for item in data]
        return [single(data, initial)]


class BulkUploadForm(forms.Form):
    """Several files or zips. Each file's own fault is its row in the results; only a rule of the
    whole upload (too many files, a zip past its limits) is a form error. When the form comes
    back for another reason (a bad new domain) the files read are kept on the server
    (``held_uploads``), so the next submit may leave the input empty."""

    #: the staff user held files belong to (set per request by the bulk upload view)
    held_owner: int | None = None

    files = MultipleFileField(
        label=_("Files"),
        required=False,  # held files may stand in for them (checked in clean)
        help_text=_(
            "Several files (.md, .markdown, .txt, .pdf, .docx, .pptx, .xlsx, .csv, .html, .htm), or a "
            ".zip of a folder tree (top folder = domain when neither the frontmatter nor the choice "
            "below names one)."
        ),
    )

    domain_choice = _domain_field()
    new_domain = _new_domain_field()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["domain_choice"].choices = _domain_choices()
        self.fields["files"].widget.held = []
        self._held_tokens: list[str] = []

    def _read(self, uploads) -> list[tuple[str, bytes]]:
        if len(uploads) > settings.INGEST_MAX_FILES_PER_UPLOAD:
            raise forms.ValidationError(
                _("%(count)s files; the limit is %(limit)s per upload (INGEST_MAX_FILES_PER_UPLOAD)."),
                params={"count": len(uploads), "limit": settings.INGEST_MAX_FILES_PER_UPLOAD},
            )
        read = []
        for upload in uploads:
            if upload.name.lower().endswith(".zip"):
                limit = settings.INGEST_MAX_UNZIPPED_BYTES
                read.append(
                    (upload.name, _read_limited(upload, limit=limit, setting="INGEST_MAX_UNZIPPED_BYTES"))
                )
            else:
                # At most one byte past the limit: enough for the service to refuse this file alone.
                read.append((upload.name, upload.read(settings.INGEST_MAX_FILE_BYTES + 1)))
        return read

    def _held(self) -> list[tuple[str, bytes]]:
        tokens = self.data.getlist("files-held") if hasattr(self.data, "getlist") else []
        if not tokens:
            raise forms.ValidationError(self.fields["files"].error_messages["required"], code="required")
        held = [upload_held(owner=self.held_owner, token=token) for token in tokens]
        if any(h is None for h in held):
            raise forms.ValidationError(
                gettext("The files chosen before are no longer kept: choose them again.")
            )
        self._held_tokens = tokens
        return [h for h in held if h is not None]

    def clean(self):
        cleaned = super().clean()
        cleaned["chosen_domain"] = _chosen_domain(self)
        uploads = cleaned.get("files") or []
        read: list[tuple[str, bytes]] = []
        try:
            read = self._read(uploads) if uploads else self._held()
        except forms.ValidationError as exc:
            self.add_error("files", exc)
        cleaned["read"] = read
        return cleaned

    def full_clean(self):
        super().full_clean()
        if not self.is_bound or not self._errors:
            return
        read = (self.cleaned_data or {}).get("read") or []
        if "files" in self._errors or not read or self.held_owner is None:
            self.held_release()  # the files were what was wrong: the input asks for them again
            return
        tokens = self._held_tokens or [
            upload_hold(owner=self.held_owner, name=name, data=data) for name, data in read
        ]
        self.fields["files"].widget.held = [
            (token, name) for token, (name, _data) in zip(tokens, read, strict=True)
        ]

    def held_release(self) -> None:
        """Drop the held files once they are uploaded (or no longer wanted)."""
        for token in self._held_tokens:
            upload_release(owner=self.held_owner, token=token)


# --- admin -------------------------------------------------------------------------------------
@admin.register(ApiDocument)
class ApiDocumentAdmin(admin.ModelAdmin):
    list_display = ("title", "doc_key", "domain", "status_badge", "chunk_count", "indexed_at", "updated_at")
    list_filter = ("status", "domain")
    search_fields = ("title", "doc_key")
    list_per_page = 50
    actions = ["retry_indexing"]
    change_list_template = "admin/knowledge/apidocument/change_list.html"
    readonly_fields = (
        "doc_key",
        "title",
        "domain",
        "status_live",
        "error_live",
        "chunks_live",
        "indexed_at",
        "content_hash",
        "original_file",
        "metadata_pretty",
        "content_text",
        "chunks_table",
        "created_at",
        "updated_at",
    )

    # --- forms ---------------------------------------------------------------------------------
    def get_form(self, request, obj=None, change=False, **kwargs):
        kwargs["form"] = DocumentChangeForm if obj is not None else DocumentUploadForm
        kwargs["fields"] = None
        form = super().get_form(request, obj, change=change, **kwargs)
        if obj is None:
            form.held_owner = request.user.pk  # a held file is this user's alone
        return form

    def get_fieldsets(self, request, obj=None):
        if obj is None:
            return [(None, {"fields": ("file", "domain_choice", "new_domain", "key")})]
        return [
            (
                None,
                {
                    "fields": (
                        "doc_key",
                        "title",
                        "domain",
                        "status_live",
                        "error_live",
                        "chunks_live",
                        "indexed_at",
                        "original_file",
                    )
                },
            ),
            (_("Replace"), {"fields": ("replacement",)}),
            (
                _("Converted Markdown and its chunks (the text agents receive)"),
                {"classes": ["collapse"], "fields": (("content_text", "chunks_table"),)},
            ),
            (_("Planner metadata"), {"fields": ("covers", "when_to_retrieve")}),
            (
                _("Content"),
                {
                    "classes": ["collapse"],
                    "fields": ("metadata_pretty", "content_hash", "created_at", "updated_at"),
                },
            ),
        ]

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj is not None else ()

    # --- columns -------------------------------------------------------------------------------
    @admin.display(description=_("status"), ordering="status")
    def status_badge(self, obj: ApiDocument):
        colours = {"INDEXED": "#2e7d32", "FAILED": "#c62828", "INDEXING": "#1565c0", "PENDING": "#6d6d6d"}
        # data-doc-*: the list refreshes the badge while indexing runs (knowledge/admin/status.py).
        if obj.status == ApiDocument.Status.FAILED and obj.error:
            return format_html(
                '<span style="color:{}" title="{}" data-doc-id="{}" data-doc-status="{}">{}: {}</span>',
                colours["FAILED"],
                obj.error,
                obj.pk,
                obj.status,
                obj.get_status_display(),
                Truncator(obj.error).chars(80),
            )
        return format_html(
            '<span style="color:{}" data-doc-id="{}" data-doc-status="{}">{}</span>',
            colours.get(obj.status, "inherit"),
            obj.pk,
            obj.status,
            obj.get_status_display(),
        )

    # The change page's status, error and chunk count follow the badge above them: the poller
    # (document_status.js) updates every element carrying the document's id, so after Re-index
    # the fields do not keep saying Pending while the badge says Indexed.
    @admin.display(description=_("status"))
    def status_live(self, obj: ApiDocument):
        return format_html(
            '<span data-doc-id="{}" data-doc-status="{}" data-doc-show="label">{}</span>',
            obj.pk,
            obj.status,
            obj.get_status_display(),
        )

    @admin.display(description=_("error"))
    def error_live(self, obj: ApiDocument):
        return format_html('<span data-doc-error-of="{}">{}</span>', obj.pk, obj.error or "-")

    @admin.display(description=_("chunk count"))
    def chunks_live(self, obj: ApiDocument):
        return format_html('<span data-doc-chunks-of="{}">{}</span>', obj.pk, obj.chunk_count)

    @admin.display(description=_("metadata"))
    def metadata_pretty(self, obj: ApiDocument):
        return format_html("<pre>{}</pre>", json.dumps(obj.metadata, ensure_ascii=False, indent=2))

    @admin.display(description=_("chunks"))
    def chunks_table(self, obj: ApiDocument):
        # Read-only: chunks are written by indexing only (a formset would also demand its
        # management fields on every save of the form).
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td><pre style='white-space:pre-wrap;margin:0'>{}</pre></td></tr>",
            obj.chunks.order_by("chunk_index").values_list("chunk_index", "heading_path", "pages", "content"),
        )
        return format_html(
            "<table><thead><tr><th>#</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>{}</tbody></table>",
            _("heading path"),
            _("pages"),
            _("text"),
            rows,
        )

    @admin.display(description=_("converted Markdown"))
    def content_text(self, obj: ApiDocument):
        return format_html('<pre style="white-space:pre-wrap;max-width:48em">{}</pre>', obj.content)

    @admin.display(description=_("original file"))
    def original_file(self, obj: ApiDocument):
        original = DocumentOriginal.objects.filter(document_id=obj.pk).only("file_name", "size").first()
        if original is None:
            return "-"
        return format_html(
            '<a href="{}">{}</a> ({} bytes)',
            reverse("admin:knowledge_apidocument_original", args=[obj.pk]),
            original.file_name,
            f"{original.size:,}",
        )

    # --- writes go through the services --------------------------------------------------------
    def save_model(self, request, obj, form, change):
        if not change:
            result = document_ingest(
                data=form.cleaned_data["data"],
                name=form.cleaned_data["name"],
                domain=form.cleaned_data["chosen_domain"],
            )
            form.held_release()
            document = result.document
            for field in ApiDocument._meta.concrete_fields:
                setattr(obj, field.attname, getattr(document, field.attname))
            obj._state.adding = False
            obj._ingest_result = result
            return
        if form.cleaned_data.get("data") is not None:
            result = document_ingest(data=form.cleaned_data["data"], name=obj.doc_key, domain=obj.domain)
            self.message_user(request, self._outcome_message(result), messages.INFO)
        self._save_planner_metadata(request, obj, form)

    def _save_planner_metadata(self, request, obj, form) -> None:
        if not ({"covers", "when_to_retrieve"} & set(form.changed_data)):
            return
        from knowledge.services.document_metadata import document_metadata_update

        covers = None
        if "covers" in form.changed_data:
            covers = [line.strip() for line in form.cleaned_data["covers"].splitlines() if line.strip()]
        when = form.cleaned_data["when_to_retrieve"] if "when_to_retrieve" in form.changed_data else None
        document_metadata_update(document_id=obj.pk, covers=covers, when_to_retrieve=when)

    def save_related(self, request, form, formsets, change):
        pass  # nothing related is edited here: chunks are written by indexing only

    def response_add(self, request, obj, post_url_continue=None):
        result: IngestResult | None = getattr(obj, "_ingest_result", None)
        if result is not None:
            self.message_user(request, self._outcome_message(result), messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:knowledge_apidocument_change", args=[obj.pk]))

    @staticmethod
    def _outcome_message(result: IngestResult) -> str:
        text = _OUTCOME_TEXT[result.outcome]
        if result.requeued:
            text = _("unchanged; its last indexing had failed, so it was queued again")
        return f"“{result.doc_key}”: {text}"

    def delete_model(self, request, obj):
        document_delete(document=obj)

    def delete_queryset(self, request, queryset: QuerySet[ApiDocument]):
        for document in queryset:
            document_delete(document=document)

    @admin.action(description=_("Retry indexing of the selected documents"))
    def retry_indexing(self, request, queryset):
        count = documents_reindex(document_ids=list(queryset.values_list("id", flat=True)))
        self.message_user(
            request,
            ngettext(
                "Indexing queued for %(count)d document.", "Indexing queued for %(count)d documents.", count
            )
            % {"count": count},
            messages.SUCCESS,
        )

    def changelist_view(self, request, extra_context=None):
        # Arrived from "Go to the documents" after a bulk upload: say so, and how to see all.
        ids = request.GET.get("id__in", "")
        if ids:
            extra_context = {**(extra_context or {}), "upload_filter": len([i for i in ids.split(",") if i])}
        return super().changelist_view(request, extra_context)

    # --- bulk upload page ----------------------------------------------------------------------
    def get_urls(self):
        return [
            path(
                "upload/",
                self.admin_site.admin_view(self.bulk_upload_view),
                name="knowledge_apidocument_bulk_upload",
            ),
            path(
                "<int:object_id>/original/",
                self.admin_site.admin_view(self.original_download_view),
                name="knowledge_apidocument_original",
            ),
            *status_urls(self),
            *super().get_urls(),
        ]

    def original_download_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """The file as it was uploaded, as an attachment (never rendered inline: it may be HTML)."""
        document = ApiDocument.objects.filter(pk=object_id).first()
        if document is None or not self.has_view_permission(request, document):
            raise Http404
        original = DocumentOriginal.objects.filter(document_id=object_id).first()
        if original is None:
            raise Http404
        response = HttpResponse(bytes(original.data), content_type="application/octet-stream")
        response["Content-Disposition"] = content_disposition_header(True, original.file_name)
        response["X-Content-Type-Options"] = "nosniff"
        return response

    def bulk_upload_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_add_permission(request):
            raise PermissionDenied
        results: list[IngestResult] = []
        if request.method == "POST":
            form = BulkUploadForm(request.POST, request.FILES)
            form.held_owner = request.user.pk  # held files are this user's alone
            if form.is_valid():
                try:
                    results = documents_upload(
                        files=form.cleaned_data["read"], domain=form.cleaned_data["chosen_domain"]
                    )
                except UploadRejected as exc:
                    form.add_error("files", str(exc))
                    form.held_release()  # the upload itself was refused: pick the files again
                else:
                    form.held_release()
                    form = BulkUploadForm()
        else:
            form = BulkUploadForm()
        counts = {outcome: sum(1 for r in results if r.outcome == outcome) for outcome in _OUTCOME_TEXT}
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": _("Upload documents"),
            "form": form,
            "results": [
                {
                    "name": r.name,
                    "outcome": r.outcome,
                    "outcome_text": _OUTCOME_TEXT[r.outcome],
                    "error": r.error,
                    "document": r.document,
                    "url": reverse("admin:knowledge_apidocument_change", args=[r.document.pk])
                    if r.document
                    else "",
                }
                for r in results
            ],
            "counts": counts,
            # "Go to the documents": the list filtered to exactly this upload's documents.
            "uploaded_url": _changelist_of([r.document.pk for r in results if r.document]),
            "uploaded_count": len({r.document.pk for r in results if r.document}),
            "limits": {
                "file_bytes": settings.INGEST_MAX_FILE_BYTES,
                "files": settings.INGEST_MAX_FILES_PER_UPLOAD,
                "unzipped_bytes": settings.INGEST_MAX_UNZIPPED_BYTES,
            },
        }
        return TemplateResponse(request, "admin/knowledge/apidocument/bulk_upload.html", context)


def _changelist_of(document_ids: list[int]) -> str:
    """The documents list showing only ``document_ids`` ("" for none)."""
    if not document_ids:
        return ""
    ids = ",".join(str(pk) for pk in sorted(set(document_ids)))
    return f"{reverse('admin:knowledge_apidocument_changelist')}?id__in={ids}"
