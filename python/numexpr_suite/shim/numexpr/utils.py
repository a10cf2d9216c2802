"""numexpr.utils under lazyfuse: thread settings mapped to lazyfuse's pool."""
from lazyfuse.numexpr import (_init_num_threads, detect_number_of_cores, get_num_threads,  # noqa: F401
                              get_vml_num_threads, set_num_threads, set_vml_num_threads)
