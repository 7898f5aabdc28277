"""Services of the knowledge app (writes). One module per concern:

- ``documents``: store an uploaded file as a document (parse, keep the original, queue
  indexing), delete one.
- ``index_queue``: indexing queued on commit, one document or many together (batch tasks).
- ``indexing``: chunk, embed, upsert, swap and prune, for one document or a batch.
- ``index_status``: the statuses and failure reasons an indexing run records.
- ``chunk_preparation``: a document's chunks, the text their vectors embed, their rows.
- ``vectors``: vectors no chunk row backs pruned, a document's removed; the collection
  recreated and checked.
- ``reindex``: stored documents queued for indexing again.
- ``uploads``: batches of files, zips and folders into documents, with the upload limits.
- ``export``: documents back to files with their frontmatter.
- ``locks``: the per-document lock that keeps two indexing runs of one document apart.
- ``domains``: knowledge_domain rows, document counts, when_to_retrieve regeneration.
- ``document_metadata``: a document's covers / when_to_retrieve (after it is indexed).
- ``versions``: the original file kept, a re-upload's text prepared (converted) and swapped in.
- ``sync``: a folder mirrored (``sync_documents``, ``SYNC_SOURCES``).
- ``maintenance``: the pending sweep and the index check.

One direction between services and tasks, for the whole project:

- **tasks call services.** A task takes ids, imports its service at module top (the task modules
  are imported by Celery only) and does nothing but call it, retry temporary errors and record
  failure; it is named ``<thing>_<verb>_task`` or carries an explicit ``name=``.
- **services queue tasks on commit.** A service never calls ``.delay()`` inside its transaction:
  it registers ``transaction.on_commit`` with a function that imports the task module lazily
  (``from knowledge.tasks.indexing import index_document`` inside it), so services never import
  tasks at import time and a rolled-back write queues nothing.
- a service of one concern calls another concern's service, never its task.
"""
