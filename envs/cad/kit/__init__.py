"""The CAD API a model's program imports in the sandbox, as `cadkit`: CSG on manifold3d, and saving the part.

This folder is mounted into the sandbox on its own (`jointrl.envs.sandbox.runtime`), without the rest of
jointrl, so it imports only numpy, manifold3d, the standard library and itself (relatively).
"""
from .csg import *  # noqa: F401,F403  (the program's namespace: `from cadkit import box, save`)
from .csg import __all__  # noqa: F401

# The name programs import this folder by inside the sandbox.
KIT = "cadkit"
