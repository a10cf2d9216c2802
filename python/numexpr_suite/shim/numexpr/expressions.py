"""numexpr.expressions under lazyfuse: the names numexpr's tests import."""
from lazyfuse.numexpr import ConstantNode  # noqa: F401
