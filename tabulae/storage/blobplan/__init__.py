"""The Blob store's operations written once, as plans (:mod:`tabulae.storage.plan`) that both
engines run: what each reads, decides and writes, in what order. A blob is addressed by a
:class:`~tabulae.storage.blobplan.reads.At`: its key and its distribution key (0 on an engine
without one). What only one engine does (SQLite's content files, PostgreSQL's chunk rows, its
container advisory locks) stays in that engine's store and reaches a plan as a statement or a
sub-plan it passes in."""
