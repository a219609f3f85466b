"""The logic classes of the join operators and ChangelogNormalize, by spec type (for runtime/job.py)."""

from __future__ import annotations

from ...planner.physical.join_specs import (
    ChangelogNormalizeSpec,
    IntervalJoinSpec,
    LookupJoinSpec,
    RegularJoinSpec,
    TemporalJoinSpec,
    WindowJoinSpec,
)
from .changelog_normalize import ChangelogNormalizeLogic
from .interval_join import IntervalJoinLogic
from .lookup_join import LookupJoinLogic
from .regular_join import RegularJoinLogic
from .temporal_join import TemporalJoinLogic
from .window_join import WindowJoinLogic

JOIN_LOGICS = {
    ChangelogNormalizeSpec: ChangelogNormalizeLogic,
    IntervalJoinSpec: IntervalJoinLogic,
    LookupJoinSpec: LookupJoinLogic,
    RegularJoinSpec: RegularJoinLogic,
    TemporalJoinSpec: TemporalJoinLogic,
    WindowJoinSpec: WindowJoinLogic,
}
