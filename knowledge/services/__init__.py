"""Services of the knowledge app (writes). One module per concern:

- ``documents``: store an uploaded file as a document (parse, keep the original, queue
  indexing), delete one.
- ``index_queue``: indexing queued on commit, one document or many together (batch tasks).
- ``indexing``: chunk, embed, upsert, swap and prune, for one document or a batch.
- ``index_status``: the statuses and failure reasons an indexing run records.
- ``index_lease``: the lease a running indexing run holds on its documents and renews, so the
  sweep notices a run that died within a minute.
- ``chunk_preparation``: a document's chunks, the text their vectors embed, their rows.
- ``vectors``: vectors no chunk row backs pruned, a document's removed; the collection
  recreated and checked.
- ``reindex``: stored documents queued for indexing again.
- ``uploads``: batches of files, zips and folders into documents, with the upload limits.
- ``export``: documents back to files with their frontmatter.
- ``locks``: the per-document lock that keeps two indexing runs of one document apart, and the
  slots that cap how many summary tasks call the LLM at once.
- ``domains``: knowledge_domain rows, document counts, when_to_retrieve regeneration.
- ``document_metadata``: a document's covers / when_to_retrieve (after it is indexed).
- ``versions``: the original file kept, a re-upload's text prepared (converted) and swapped in.
- ``sync``: a folder mirrored (``sync_documents``, ``SYNC_SOURCES``).
- ``maintenance``: the pending sweep (PENDING too long, or INDEXING with a lapsed lease) and the
  index check.

One direction between services and tasks, for the whole project:

- **tasks call services.** A task takes ids, imports its service at module top (the task modules
  are imported by Celery only) and does nothing but call it, retry temporary errors and record
  failure; it is named ``<thing>_<verb>_task`` or carries an explicit ``name=``.
- **services queue tasks on commit, by name.** A service never calls ``.delay()`` inside its
  transaction and never imports a task module, not even inside a function: it queues the task by
  its registered name with ``config.queueing.task_queue_on_commit("knowledge.index_document",
  ...)``, which sends it once the transaction commits (a rolled-back write queues nothing) and
  honours ``task_always_eager``. A service that sends several tasks in one callback of its own
  takes them from ``config.queueing.registered_task``.
- a service of one concern calls another concern's service, never its task.

``.importlinter`` holds this: ``knowledge.tasks`` sits above ``knowledge.services`` in the
layers contract, so an import of a task module from a service fails ``lint-imports``.
"""
