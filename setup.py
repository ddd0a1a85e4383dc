"""Maps the fixed top-level folders onto the `jointrl.*` namespace (pyproject cannot compute this list)."""
from setuptools import find_packages, setup

TOP = ["rl", "envs", "rewards", "model", "kernels"]

packages = ["jointrl." + p for p in find_packages(include=[f"{t}" for t in TOP] + [f"{t}.*" for t in TOP])]
package_dir = {f"jointrl.{t}": t for t in TOP}
# Recipes are data (YAML), shipped so model presets resolve from an installed wheel too.
packages.append("jointrl.recipes")
package_dir["jointrl.recipes"] = "recipes"

setup(packages=packages, package_dir=package_dir)
