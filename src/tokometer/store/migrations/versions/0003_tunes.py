"""A table of tunes, one document per ``tokometer tune`` (its plan and what each variant gave).

Adds ``tunes`` (``name`` the key, ``document`` the tune's JSON, ``updated_at``); the runs of its variants stay
ordinary runs. A store that has the table already (made whole by a test from the code's schema) keeps it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("tunes"):
        return
    op.create_table(
        "tunes",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("document", sa.JSON, nullable=False),
        sa.Column("updated_at", sa.String(40), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("tunes")
