"""A job: its bound config (:func:`load_config`), its plan and its query, behind the :class:`Job` facade.

Inside, the stages share a :class:`~dagger.job.context.JobContext`: :mod:`~dagger.job.descriptors` (fetch, pin,
refresh, compatibility), :mod:`~dagger.job.inputs` (sources → invalid rows → watermark → pre-processors),
:mod:`~dagger.job.plan` (rewrite → SQL → retention → Longbow → post-processors → output mode → sink checks) and
:mod:`~dagger.job.start` (streaming and bounded). Observers read a job through :class:`~dagger.job.view.JobView`.
"""

from dagger.job.binding import load_config, validate_config
from dagger.job.context import JobCounters, RunOptions
from dagger.job.facade import Job
from dagger.job.plan import Plan
from dagger.job.view import JobView

__all__ = ["Job", "JobCounters", "JobView", "Plan", "RunOptions", "load_config", "validate_config"]
