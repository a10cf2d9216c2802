"""pytest plugin: numexpr's own test suite (numexpr/tests/test_numexpr.py, from
the numexpr release installed from the registry) run against lazyfuse.

python/numexpr_suite/run.sh copies the test file out of the installed
numexpr and runs pytest on it with -p lazyfuse_numexpr_plugin and
PYTHONPATH=shim/, so that ``import numexpr`` (in the tests and in the
subprocesses some of them start) is lazyfuse.numexpr. This plugin checks
that, skips the tests of features lazyfuse does not have (SKIPS: a reason
for each), and ends the run with the counts: passed, skipped by reason,
failed.
"""
import collections
import os
import re
import sys

SHIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shim")
if SHIM not in sys.path:
    sys.path.insert(0, SHIM)
for name in [m for m in sys.modules if m == "numexpr" or m.startswith("numexpr.")]:
    del sys.modules[name]

import numexpr  # noqa: E402

if not numexpr.__file__.startswith(SHIM):
    raise ImportError(f"numexpr resolves to {numexpr.__file__}, not lazyfuse's shim in {SHIM}")

VM = "numexpr's virtual machine (NumExpr objects, disassemble, ConstantNode): lazyfuse compiles its own graph"
STRINGS = "strings: lazyfuse has no string dtype"
COMPLEX = "complex numbers: lazyfuse has no complex dtype"
VML = "Intel VML: lazyfuse does not use it"

# regular expression on the node id (test_numexpr2 runs test_numexpr's tests
# again) -> reason
SKIPS = [
    (r"::test_numexpr2?::(test_simple|test_simple_expr_small_array|test_simple_expr|test_rational_expr"
     r"|test_reductions|test_r0_reuse)$", VM),
    (r"::test_evaluate::(test_broadcasting|test_all_scalar|test_run|test_disassemble|test_constant_deduplication"
     r"|test_nan_constant|test_f32_constant)$", VM),
    (r"::test_str_contains", STRINGS),
    (r"::test_strings::", STRINGS),
    (r"::test_evaluate::(test_complex_tan|test_complex_expr|test_complex_strides)$", COMPLEX),
    # tests whose first part lazyfuse passes and whose rest needs a missing
    # feature (python/tests/test_numexpr_parts.py runs those first parts)
    (r"::test_evaluate::test_no_sanitize$", VM + " (its second half)"),
    (r"::test_evaluate::test_sanitize$", COMPLEX + " and strings (its second half: c.real, 1.5j, x == 'b:')"),
    (r"::test_evaluate::test_bool_funcs$", COMPLEX + " (its last third: isnan etc. of complex128)"),
    (r"::test_evaluate::test_sign_round$", COMPLEX + " (its last part: sin(complex(a, b)))"),
    (r"::test_evaluate::test_ex_uses_vml$", VML),
]


def _skip_reason(nodeid):
    for pattern, reason in SKIPS:
        if re.search(pattern, nodeid):
            return reason
    return None


def pytest_configure(config):
    config.addinivalue_line("markers", "thread_unsafe: numexpr's marker (tests that change global state)")


def pytest_collection_modifyitems(config, items):
    import pytest
    for item in items:
        reason = _skip_reason(item.nodeid)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


_outcomes = collections.Counter()
_skips = collections.Counter()
_failed = []


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            reason = reason.replace("Skipped: ", "")
            _skips[_normalize(reason)] += 1
            _outcomes["skipped"] += 1
        elif report.failed:
            _outcomes["failed"] += 1
            _failed.append(report.nodeid)
        elif report.when == "call":
            _outcomes["passed"] += 1


def _normalize(reason):
    """Groups test_expressions' skips (raised by lazyfuse's NotImplementedError:
    "'expr' not implemented for complex (scalar=0, opt=none)") by dtype and
    function."""
    m = re.match(r"'(.*)' not implemented for (\w+)", reason)
    if m:
        expr, dtype = m.groups()
        if dtype == "complex":
            return f"test_expressions, dtype complex: {COMPLEX}"
        fn = re.search(r"(nextafter|copysign|signbit|contains|conj|real|imag)", expr)
        return f"test_expressions, {fn.group(1) if fn else expr}: lazyfuse has no {fn.group(1) if fn else 'such operation'}"
    return reason


def pytest_terminal_summary(terminalreporter):
    tr = terminalreporter
    tr.section("lazyfuse: numexpr's test suite")
    tr.write_line(f"passed {_outcomes['passed']}, skipped {_outcomes['skipped']}, failed {_outcomes['failed']}")
    for reason, n in _skips.most_common():
        tr.write_line(f"  skipped {n:5d}: {reason}")
    for nodeid in _failed:
        tr.write_line(f"  failed: {nodeid}")
