"""The install maps the fixed top-level folders under `jointrl.` and puts nothing else on the path."""
import subprocess
import sys
from pathlib import Path


def test_packages_import_from_any_directory_and_no_bare_top_level_names(tmp_path):
    # A bare name may be some installed distribution (Hugging Face ships a `kernels`), never a folder of ours.
    root = str(Path(__file__).resolve().parents[1])
    script = (
        "import importlib.util, os, jointrl.rl, jointrl.envs, jointrl.rewards, jointrl.model, jointrl.kernels\n"
        "specs = [importlib.util.find_spec(n) for n in ('rl', 'envs', 'rewards', 'model', 'kernels')]\n"
        f"print([s is None or os.path.join({root!r}, n) not in map(os.path.abspath, s.submodule_search_locations or [])\n"
        "       for n, s in zip(('rl', 'envs', 'rewards', 'model', 'kernels'), specs)])\n"
    )
    # Run outside the repository so the working directory cannot supply the folders.
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[True, True, True, True, True]"


def test_shipped_recipes_resolve_as_package_data():
    from importlib import resources

    names = {p.name for p in resources.files("jointrl.recipes").iterdir()}
    assert "quickstart.yaml" in names and "models" in names
