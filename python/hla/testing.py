"""For pytest: assert that a kernel's output is the exact operator's (hla.check)."""

from ._hla import check


def assert_hla_close(o, q, k, v, **options):
    """Raises AssertionError, whose message is the check's summary, unless hla.check passes.
    Options as hla.check (variant, decay, scale, precision, output_dtype, layout, ...)."""
    result = check(o, q, k, v, **options)
    if not result.passed:
        raise AssertionError(result.summary())
    return result
