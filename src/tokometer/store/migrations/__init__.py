"""The results store's schema migrations (Alembic), shipped with the package and run by `tokometer.store.migrate`.

``env.py`` runs the revisions in ``versions/`` on the connection it is handed; no ``alembic.ini`` is needed.
Revision ``0001`` is the baseline: schema version 4, which it creates in an empty database and completes in
a store made by tokometer before migrations were Alembic's (versions 1-4, no ``alembic_version`` table).
A new revision: ``alembic -c src/tokometer/store/migrations/alembic.ini revision -m "what"`` writes it from
``script.py.mako``; `tests/integration/test_store_backends.py` checks the migrated schema equals
`tokometer.store.schema` on SQLite and PostgreSQL.
"""
