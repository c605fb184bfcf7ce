"""Suite-wide test settings."""

from hypothesis import HealthCheck, settings

# Property tests run on shared and loaded machines (CI, benchmarks beside them): no per-example deadline, and
# slow data generation is not a failure. Each test still sets its own number of examples.
settings.register_profile("toolwatch", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("toolwatch")
