"""Several nodes on one PostgreSQL database: the engine's side of ``journal.postgres``.

One module per concept: the storage calls (:mod:`.scheduler`), the firing path's records as
compare-and-set statements (:mod:`.sink`), stored rows into the timer table (:mod:`.adopting`),
the lease loop (:mod:`.leasing`), the horizon refill and the change feed (:mod:`.loading`),
and the node that composes them (:mod:`.node`). Importing this package imports nothing of
psycopg; :mod:`.node` does (the ``postgres`` extra).
"""
