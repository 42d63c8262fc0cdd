"""The project as a user gets it: the sdist and wheel build, and the wheel alone (no source
tree) installs into a fresh virtual environment and runs the quickstart."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import venv
import zipfile
from pathlib import Path

import pytest

from .ports import free_ports

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _wait_line(proc: subprocess.Popen[str], needle: str, timeout: float = 60) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if needle in line:
            return line
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"no {needle!r} from {proc.args}")


def test_wheel_installs_alone_and_runs_the_quickstart(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    # The wheel is built from the sdist, as pip builds one: nothing left in the checkout's
    # build/ (an old `spark` package, say) can slip into it.
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    wheels = list(dist.glob("rmq-*.whl"))
    assert len(wheels) == 1 and list(dist.glob("rmq-*.tar.gz"))
    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "rmq/client/__init__.py" in names and "rmq/py.typed" in names
    assert not any(n.startswith("tests/") for n in names)
    # The Spark integration installs as rmq_spark: a top-level `spark` would shadow users' own.
    assert "rmq_spark/__init__.py" in names and "rmq_spark/sources.py" in names
    assert not any(n.split("/")[0] == "spark" for n in names)

    # Nothing from this process may leak in: a PYTHONPATH naming the source tree (Spark tests
    # set one) would make pip think rmq is installed already and the commands import it.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NAMESRV_ADDR", "VIRTUAL_ENV")}
    env["RMQ_RUN_DIR"] = str(tmp_path / "run")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    run_dir = tmp_path / "elsewhere"  # no source tree to import from by accident
    run_dir.mkdir()
    subprocess.run(
        [str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q", str(wheels[0])],
        check=True, capture_output=True, timeout=600, env=env, cwd=run_dir,
    )  # fmt: skip
    imports = "import importlib.util, rmq_spark.options; print(importlib.util.find_spec('spark'))"
    found = subprocess.run([str(py), "-c", imports], capture_output=True, text=True, cwd=run_dir, env=env, timeout=60)
    assert found.returncode == 0 and found.stdout.strip() == "None", found.stdout + found.stderr
    rmq = str(env_dir / "bin" / "rmq")
    ns_port, broker_port = free_ports(), free_ports(3, below=2)
    procs: list[subprocess.Popen[str]] = []
    try:
        namesrv = subprocess.Popen(
            [rmq, "namesrv", "-p", str(ns_port), "--host", "127.0.0.1"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=run_dir, env=env,
        )  # fmt: skip
        procs.append(namesrv)
        _wait_line(namesrv, "boot success")
        conf = run_dir / "broker.conf"
        conf.write_text(
            f"brokerName=broker-a\nlistenPort={broker_port}\nbrokerIP1=127.0.0.1\nbindAddress=127.0.0.1\n"
            f"namesrvAddr=127.0.0.1:{ns_port}\nstorePathRootDir={run_dir / 'store'}\n"
            "mappedFileSizeCommitLog=67108864\n"
        )
        broker = subprocess.Popen(
            [rmq, "broker", "-c", str(conf)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=run_dir, env=env,
        )  # fmt: skip
        procs.append(broker)
        _wait_line(broker, "boot success")
        ns = f"127.0.0.1:{ns_port}"
        produced = subprocess.run(
            [rmq, "quickstart", "producer", "-n", ns, "-c", "20"],
            capture_output=True, text=True, cwd=run_dir, env=env, timeout=120, check=True,
        )  # fmt: skip
        assert produced.stdout.count("SendResult [sendStatus=SEND_OK") == 20
        consumed = subprocess.run(
            [rmq, "quickstart", "consumer", "-n", ns, "--count", "20", "--from", "first", "--seconds", "60"],
            capture_output=True, text=True, cwd=run_dir, env=env, timeout=120, check=True,
        )  # fmt: skip
        assert consumed.stdout.count("MessageExt [") >= 20
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
