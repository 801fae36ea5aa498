"""Version 5: each run keeps its prompt source and its warnings, so ``runs --id`` prints what ``bench --json`` wrote.

Adds ``runs.prompt_source`` (what the prompts came from: ``synthetic``, a file, a trace) and ``runs.warnings``
(a JSON list: the run's own warnings, then its steps'), both nullable: a run saved before has neither
(``null`` and ``[]`` in its JSON, as before).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    have = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("runs")}
    if "prompt_source" not in have:
        op.add_column("runs", sa.Column("prompt_source", sa.Text))
    if "warnings" not in have:
        op.add_column("runs", sa.Column("warnings", sa.JSON))


def downgrade() -> None:
    op.drop_column("runs", "warnings")
    op.drop_column("runs", "prompt_source")
