"""Hypothesis settings for the fuzz suite (issue 22: only documented exceptions, bounded in time).

Profile ``ci`` (the default): 30 examples a test, a 30 s deadline per example (it catches an example that
hangs or goes quadratic, not a busy machine: with the suite's workers beside it an example's first call, which
imports the SDKs it drives, took 2.6 s where it takes 16 ms alone),
derandomized (the same examples every run, so a failure in CI is a failure on every machine) and no
example database written into the tree: the whole suite runs in well under a minute on 2 cores. Profile
``thorough`` (``TOKOMETER_FUZZ_PROFILE=thorough``): 2,000 examples a test, random, no deadline, for a
session spent looking for bugs.
"""

from __future__ import annotations

import os
from datetime import timedelta

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=30, deadline=timedelta(seconds=30), derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow], print_blob=True)
settings.register_profile("thorough", max_examples=2000, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("TOKOMETER_FUZZ_PROFILE", "ci"))
