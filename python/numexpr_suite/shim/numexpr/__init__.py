"""numexpr, as lazyfuse provides it: only for running numexpr's own test
suite against lazyfuse (python/numexpr_suite/README.md). It re-exports
lazyfuse.numexpr."""
from lazyfuse.numexpr import *  # noqa: F401,F403
from lazyfuse.numexpr import (ConstantNode, E, MAX_THREADS, NumExpr, __version__, _init_num_threads,  # noqa: F401
                              detect_number_of_cores, disassemble, evaluate, get_num_threads, ncores,
                              nthreads, re_evaluate, set_num_threads, set_vml_accuracy_mode,
                              set_vml_num_threads, use_vml, validate, version)
from . import expressions, utils  # noqa: F401,E402
