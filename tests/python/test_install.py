# cmake --install puts the package where the interpreter finds it under the prefix
# (lib/python3.X/dist-packages), and the installed package runs the installed daemons by itself.
import os
import subprocess
import sys

import pytest

pytest.importorskip("psched")
BUILD_DIR = os.environ.get("PSCHED_BUILD_DIR")


@pytest.mark.skipif(not BUILD_DIR, reason="PSCHED_BUILD_DIR not set (ctest sets it)")
def test_the_installed_package_runs_a_sum_on_the_installed_daemons(tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", str(prefix)], check=True, capture_output=True)
    site = prefix / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "dist-packages"
    assert (site / "psched" / "__init__.py").exists()
    env = {k: v for k, v in os.environ.items() if k not in ("PSCHED_BIN_DIR", "PYTHONPATH")}
    env["PYTHONPATH"] = str(site)
    code = ("import psched, psched.array as pa\n"
            "with psched.LocalCluster(cpus=1, dashboard=False) as c, psched.Client(c):\n"
            "    print(psched.__file__, c._bin, (pa.arange(1000, chunks=64) * 2).sum().compute())\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, check=True, capture_output=True,
                         text=True, timeout=120).stdout.split()
    assert out[0].startswith(str(site)) and out[1] == str(prefix / "bin") and float(out[2]) == 999000.0
