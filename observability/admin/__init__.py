"""Admin pages of what happened: the invocation browser (with charts above the list), the
retrieval dashboard, feedback and threshold calibration, one module each (hit testing's entry is
the retrieval app's: ``retrieval.staff.hit_testing_admin``).

Pages are thin: the numbers come from ``observability.selectors`` / ``observability.calibration``,
the figures from ``observability.charts``, writes go through services.
"""

from observability.admin import (  # noqa: F401 - importing registers each entry
    calibration,
    dashboard,
    feedback,
    invocations,
)
