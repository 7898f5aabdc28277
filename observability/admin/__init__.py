"""Admin pages of what happened: the invocation browser (with charts above the list), the
retrieval dashboard, hit testing, feedback and threshold calibration, one module each.

Pages are thin: the numbers come from ``observability.selectors`` / ``observability.calibration``,
the figures from ``observability.charts``, writes go through services.
"""

from observability.admin import (  # noqa: F401 - importing registers each entry
    calibration,
    dashboard,
    feedback,
    hit_testing,
    invocations,
)
