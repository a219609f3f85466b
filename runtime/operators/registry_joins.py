"""The logic classes of the join operators and ChangelogNormalize, by spec type (for runtime/job.py)."""

from __future__ import annotations

from ...planner.physical_joins import ChangelogNormalizeOp
from .changelog_normalize import ChangelogNormalizeLogic

JOIN_LOGICS = {
    ChangelogNormalizeOp: ChangelogNormalizeLogic,
}
