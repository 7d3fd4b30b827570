"""Poplibs-style building blocks that plan tile mappings and create library vertices.

`popops` (element-wise, casts, fills, reductions), `poplin` (matrix multiply, convolution),
`popnn` (non-linearities, losses, accuracy), `poprand` (seeds), `poputil` (tile mapping),
`rearrange` (popops' regrouping of a tensor's layout).
"""

from . import poplin, popnn, popops, poprand, poputil, rearrange

__all__ = ["popnn", "poplin", "popops", "poprand", "poputil", "rearrange"]
