import subprocess
import sys


def test_valid_file_passes():
    run = subprocess.run([sys.executable, "check_config.py", "settings.ini"])
    assert run.returncode == 0
