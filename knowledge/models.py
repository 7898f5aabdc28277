"""What is known: knowledge domains, uploaded documents and their chunks.

Table names are those of the original service so its SQL (seeds 000/004) runs unchanged.
"""

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class KnowledgeDomain(models.Model):
    """One knowledge domain (the seeds' document "category"), with its planner guidance (V009)."""

    domain_id = models.CharField(max_length=64, unique=True, verbose_name=_("domain id"))
    # NULL-able as in the V009 DDL: rows written by the original service may hold NULL.
    description = models.CharField(_("description"), max_length=256, null=True, blank=True)  # noqa: DJ001
    when_to_retrieve = models.TextField(_("when to retrieve"), null=True, blank=True)  # noqa: DJ001
    document_count = models.IntegerField(default=0, verbose_name=_("document count"))
    updated_at = models.DateTimeField(null=True, blank=True, verbose_name=_("updated at"))
    created_at = models.DateTimeField(null=True, blank=True, verbose_name=_("created at"))

    # --- Regeneration bookkeeping (agentkb additions; the V009 columns above stay as they are) ---
    class SummarySource(models.TextChoices):
        LLM = "llm", _("LLM")
        EXTRACTIVE = "extractive", _("Extractive")
        MANUAL = "manual", _("Manual")

    class SummaryState(models.TextChoices):
        PENDING = "pending", _("Pending")
        RUNNING = "running", _("Running")
        OK = "ok", _("OK")
        FAILED = "failed", _("Failed")

    # Who wrote when_to_retrieve. "manual" (staff) is never overwritten by a regeneration.
    summary_source = models.CharField(
        max_length=16, choices=SummarySource.choices, blank=True, default="", verbose_name=_("summary source")
    )
    summary_state = models.CharField(
        max_length=16, choices=SummaryState.choices, blank=True, default="", verbose_name=_("summary state")
    )
    last_regenerated_at = models.DateTimeField(null=True, blank=True, verbose_name=_("last regenerated at"))
    last_error = models.TextField(blank=True, default="", verbose_name=_("last error"))
    # Debounce: every change bumps change_seq; a queued regeneration carries the seq it was queued
    # for and runs only if no newer change arrived (the newer one's task will run instead).
    change_seq = models.BigIntegerField(default=0, verbose_name=_("change sequence"))
    dirty_since = models.DateTimeField(null=True, blank=True, verbose_name=_("changed since"))
    # Lease that keeps two regenerations of one domain from interleaving when there is no Redis.
    lock_token = models.CharField(max_length=32, blank=True, default="", verbose_name=_("lock token"))
    locked_until = models.DateTimeField(null=True, blank=True, verbose_name=_("locked until"))

    class Meta:
        db_table = "knowledge_domain"
        ordering = ["domain_id"]
        verbose_name = _("knowledge domain")
        verbose_name_plural = _("knowledge domains")

    def __str__(self) -> str:
        return self.domain_id

    def save(self, *args, **kwargs):
        # The V009 columns are plain nullable DATETIMEs; keep them filled without auto_now so
        # rows written by the original service keep their values.
        now = timezone.now()
        if self.created_at is None:
            self.created_at = now
        self.updated_at = now
        super().save(*args, **kwargs)


class ApiDocument(models.Model):
    """One uploaded document. ``doc_key`` is the seeds' filePath: stable and unique."""

    class Status(models.TextChoices):
        PENDING = "PENDING", _("Pending")
        INDEXING = "INDEXING", _("Indexing")
        INDEXED = "INDEXED", _("Indexed")
        FAILED = "FAILED", _("Failed")

    doc_key = models.CharField(max_length=255, unique=True, db_column="file_path", verbose_name=_("doc key"))
    title = models.CharField(max_length=255, verbose_name=_("title"))
    domain = models.CharField(max_length=64, db_column="category", db_index=True, verbose_name=_("domain"))
    content = models.TextField(verbose_name=_("content"))
    content_hash = models.CharField(max_length=64, db_index=True, verbose_name=_("content hash"))
    metadata = models.JSONField(default=dict, blank=True, verbose_name=_("metadata"))
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True, verbose_name=_("status")
    )
    error = models.TextField(blank=True, default="", verbose_name=_("error"))
    chunk_count = models.IntegerField(default=0, verbose_name=_("chunk count"))
    # Set when a version of the document first reached INDEXED and kept through re-indexing:
    # "has an indexed version", what makes a document searchable (knowledge.selectors).
    indexed_at = models.DateTimeField(null=True, blank=True, db_index=True, verbose_name=_("indexed at"))
    # While INDEXING: the run working on it renews this every INDEX_LEASE_RENEW_SECONDS; a lease
    # that lapsed means the run died (its worker was killed), and the sweep queues it again.
    index_lease_until = models.DateTimeField(null=True, blank=True, verbose_name=_("indexing lease until"))
    created_at = models.DateTimeField(default=timezone.now, verbose_name=_("created at"))
    updated_at = models.DateTimeField(auto_now=True, verbose_name=_("updated at"))

    class Meta:
        db_table = "api_document"
        ordering = ["domain", "doc_key"]
        verbose_name = _("document")
        verbose_name_plural = _("documents")

    def __str__(self) -> str:
        return f"{self.title} ({self.doc_key})"


class DocumentChunk(models.Model):
    """One searchable piece of a document. Its vector lives in Milvus under ``chunk_id``."""

    document = models.ForeignKey(
        ApiDocument, on_delete=models.CASCADE, related_name="chunks", verbose_name=_("document")
    )
    chunk_index = models.IntegerField(verbose_name=_("chunk index"))
    heading_path = models.CharField(max_length=1024, blank=True, default="", verbose_name=_("heading path"))
    content = models.TextField(verbose_name=_("content"))
    #: the pages (PDF) or slides (PPTX) the chunk comes from: "3" or "3-4"; empty otherwise
    pages = models.CharField(max_length=32, blank=True, default="", verbose_name=_("pages"))

    class Meta:
        db_table = "document_chunk"
        ordering = ["document_id", "chunk_index"]
        verbose_name = _("document chunk")
        verbose_name_plural = _("document chunks")
        constraints = [
            models.UniqueConstraint(fields=["document", "chunk_index"], name="uniq_chunk_per_document"),
        ]

    def __str__(self) -> str:
        return self.chunk_id

    @property
    def chunk_id(self) -> str:
        return chunk_id_for(self.document.doc_key, self.chunk_index)


class DocumentOriginal(models.Model):
    """The file as uploaded (staff can download it); the document's ``content`` is its Markdown."""

    document = models.OneToOneField(
        ApiDocument,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="original",
        verbose_name=_("document"),
    )
    file_name = models.CharField(max_length=255, verbose_name=_("file name"))
    data = models.BinaryField(verbose_name=_("data"))
    size = models.IntegerField(verbose_name=_("size"))
    sha256 = models.CharField(max_length=64, verbose_name=_("SHA-256"))
    uploaded_at = models.DateTimeField(default=timezone.now, verbose_name=_("uploaded at"))

    class Meta:
        db_table = "document_original"
        verbose_name = _("original file")
        verbose_name_plural = _("original files")

    def __str__(self) -> str:
        return self.file_name


def chunk_id_for(doc_key: str, chunk_index: int) -> str:
    """The stable Milvus primary key of a chunk: re-indexing the same text upserts the same rows."""
    return f"{doc_key}#{chunk_index}"
