"""ckpt installs under its own name (``ckpt-cli`` on the package index is another project),
and every hint that says "pip install" names that distribution and the right extra."""

from __future__ import annotations

import email
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ckpt_cli.cli import app
from ckpt_cli.errors import MissingExtraError
from ckpt_cli.install import DISTRIBUTION, pip_install
from ckpt_cli.storage import Storage
from ckpt_cli.storage.errors import store_error
from tests.conftest import CASES_DIR, REPO


def test_distribution_name_everywhere() -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.search(rf'^name = "{DISTRIBUTION}"$', pyproject, re.M)
    # No install line or hint may send anyone to the other project's package.
    docs = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    for path in [*docs, *sorted((REPO / "ckpt_cli").rglob("*.py"))]:
        assert not re.search(r"install '?ckpt-cli", path.read_text()), path.relative_to(REPO)
    for extra in ("s3", "azure", "gcs", "hdfs", "spark", "parquet", "report", "all"):
        assert re.search(rf"^{extra} = \[", pyproject, re.M), extra
        assert f"{DISTRIBUTION}[{extra}]" in pip_install(extra)


def test_all_holds_every_extra() -> None:
    """[all] installs every extra a command needs: each other extra's requirements (the
    development tools aside) are in it, as written there."""
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    everything = set(extras["all"])
    for name, requirements in extras.items():
        if name not in ("all", "dev"):
            assert set(requirements) <= everything, (name, set(requirements) - everything)


def test_gs_hint_names_the_gcs_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gcsfs", None)  # as if not installed: import fails
    with pytest.raises(MissingExtraError) as info:
        Storage.from_url("gs://bucket/ckpt")
    assert info.value.message.endswith(f"needs the 'gcs' extra: pip install '{DISTRIBUTION}[gcs]'")


def test_hdfs_hint_names_libhdfs_and_the_jvm(monkeypatch: pytest.MonkeyPatch) -> None:
    # Whether pyarrow is missing (ImportError) or libjvm/libhdfs is (OSError), the hint says
    # what pyarrow's HadoopFileSystem needs at run time.
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("ARROW_LIBHDFS_DIR", "/nonexistent")
    with pytest.raises(MissingExtraError) as info:
        Storage.from_url("hdfs://namenode:8020/ckpt/q1")
    hint = info.value.hint or ""
    assert "hdfs://namenode:8020/ckpt/q1" in info.value.message
    assert "\n" not in info.value.message
    assert "libhdfs" in hint and "JAVA_HOME" in hint and "CLASSPATH" in hint


def test_s3_credentials_hint_is_about_s3() -> None:
    class NoCredentialsError(Exception):  # botocore's name, as classify_store_error sees it
        pass

    error = store_error("s3://bucket/q1", "list", NoCredentialsError("Unable to locate"))
    assert "AWS_ACCESS_KEY_ID" in (error.hint or "")
    assert "AZURE" not in (error.hint or "").upper()


def _python(version: str) -> str | None:
    """An interpreter for ``version`` (3.10...): on PATH, or one pyenv installed."""
    candidates = [shutil.which(f"python{version}")]
    pyenv = shutil.which("pyenv")
    if pyenv:
        root = subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip()
        candidates += sorted(str(p) for p in Path(root).glob(f"versions/{version}.*/bin/python"))
    for exe in candidates:
        if exe and subprocess.run([exe, "-c", "pass"], capture_output=True).returncode == 0:
            return exe
    return None


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(out)],
        check=True,
    )
    (built,) = out.glob("*.whl")
    return built


def _declared_pythons(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as whl:
        (name,) = [n for n in whl.namelist() if n.endswith(".dist-info/METADATA")]
        meta = email.message_from_bytes(whl.read(name))
    prefix = "Programming Language :: Python :: 3."
    minors = sorted(
        int(c[len(prefix) :])
        for c in meta.get_all("Classifier", [])
        if c.startswith(prefix) and c[len(prefix) :].isdigit()
    )
    assert meta["Name"] == DISTRIBUTION and meta["Requires-Python"] == f">=3.{minors[0]}"
    return [f"3.{minors[0]}", f"3.{minors[-1]}"]


def _venv_env(**more: str) -> dict[str, str]:
    """The environment of a venv's commands: the checkout not on the path."""
    return {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **more}


def _kernel_state(venv: Path) -> str:
    """What the venv's ckpt says of its compiled replay kernel: "loaded", or why not."""
    done = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "from ckpt_cli.core import kernel; print(kernel.missing() or 'loaded')",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",  # not the checkout's ckpt_cli
        env=_venv_env(),
    )
    return done.stdout.strip()


def _replay_with_debug(venv: Path, out: Path) -> tuple[bytes, str]:
    """``ckpt --debug replay`` of a real checkpoint to JSON lines: the lines and stderr."""
    checkpoint = CASES_DIR / "spark4-rocksdb-changelog" / "checkpoint"
    args = [str(venv / "bin" / "ckpt"), "--debug", "replay", str(checkpoint)]
    run = subprocess.run(
        [*args, "--format", "jsonl", "--output", str(out)], capture_output=True, env=_venv_env()
    )
    assert run.returncode == 0, run.stderr
    return out.read_bytes(), run.stderr.decode()


@pytest.mark.slow
@pytest.mark.parametrize("which", ["oldest", "newest"])
def test_wheel_installs_in_a_clean_venv(wheel: Path, tmp_path: Path, which: str) -> None:
    """A wheel built by the oldest and the newest declared Python, installed with its
    dependencies in a new venv of that Python: it holds the compiled replay kernel, which
    loads; ``ckpt`` runs on a real checkpoint and its bash completion loads and completes."""
    version = _declared_pythons(wheel)[0 if which == "oldest" else 1]
    python = _python(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    out = tmp_path / "dist"
    subprocess.run(
        [python, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(out)], check=True
    )
    (built,) = out.glob("*.whl")
    with zipfile.ZipFile(built) as whl:
        compiled = [n for n in whl.namelist() if n.endswith(".so")]
    tag = "cpython-" + version.replace(".", "")
    assert len(compiled) == 1 and compiled[0].startswith(f"ckpt_cli/_kernel.{tag}-"), compiled
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-warn-script-location"]
    subprocess.run([*pip, str(built)], check=True, capture_output=True, env=_venv_env())
    assert _kernel_state(venv) == "loaded"
    lines, stderr = _replay_with_debug(venv, tmp_path / "state.jsonl")
    assert lines.count(b"\n") > 0 and "numpy/Arrow" not in stderr
    ckpt = venv / "bin" / "ckpt"

    checkpoint = CASES_DIR / "spark4-rocksdb-changelog" / "checkpoint"
    run = subprocess.run([str(ckpt), "versions", str(checkpoint), "--json"], capture_output=True)
    assert run.returncode == 0, run.stderr
    assert b'"status":"ok"' in run.stdout.replace(b" ", b"")
    assert subprocess.run([str(ckpt), "--help"], capture_output=True).returncode == 0

    # What bash runs on <TAB> after "ckpt ver": the script calls ckpt, which must answer.
    script = (
        "source <(ckpt --show-completion bash) && complete -p ckpt >/dev/null && "
        "COMP_WORDS=(ckpt ver) && COMP_CWORD=1 && _ckpt_completion ckpt && echo ${COMPREPLY[@]}"
    )
    env = {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path)}
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["versions"]


@pytest.mark.slow
def test_the_sdist_builds_the_kernel_and_installs_without_a_compiler(tmp_path: Path) -> None:
    """The sdist, installed in a clean venv, compiles the replay kernel from its source;
    installed again where no compiler runs (CC fails), it still installs, and ``ckpt
    --debug replay`` says once that it replays with numpy/Arrow, writing the same lines."""
    python = _python(f"{sys.version_info[0]}.{sys.version_info[1]}") or sys.executable
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    pip = [py, "-m", "pip", "install", "-q", "--no-warn-script-location"]
    subprocess.run([*pip, "setuptools>=77"], check=True, capture_output=True, env=_venv_env())
    dist = tmp_path / "dist"
    build = f"from setuptools import build_meta; print(build_meta.build_sdist({str(dist)!r}))"
    made = subprocess.run([py, "-c", build], cwd=REPO, capture_output=True, text=True, check=True)
    sdist = dist / made.stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {
        "setup.py",
        "ckpt_cli/_kernel.c",
        "ckpt_cli/vendor/ryu.h",
        "ckpt_cli/vendor/xxhash.h",
        "ckpt_cli/core/kernel.py",
    } <= names
    assert not [n for n in names if n.endswith(".so")]

    subprocess.run([*pip, str(sdist)], check=True, capture_output=True, env=_venv_env())
    assert _kernel_state(venv) == "loaded"
    compiled, stderr = _replay_with_debug(venv, tmp_path / "compiled.jsonl")
    assert "numpy/Arrow" not in stderr

    env = _venv_env(CC="/bin/false")
    again = [*pip, "--no-deps", "--force-reinstall", "--no-cache-dir", str(sdist)]
    subprocess.run(again, check=True, capture_output=True, env=env)
    assert _kernel_state(venv).startswith("the compiled replay kernel is not built")
    fallback, stderr = _replay_with_debug(venv, tmp_path / "fallback.jsonl")
    assert stderr.count("replay uses numpy/Arrow") == 1
    assert fallback == compiled and compiled.count(b"\n") > 0


@pytest.mark.parametrize(
    ("shell", "marker"),
    [
        ("bash", "complete -o default -F _ckpt_completion ckpt"),
        ("zsh", "#compdef ckpt"),
        ("fish", "complete --command ckpt"),
    ],
)
def test_completion_scripts(shell: str, marker: str) -> None:
    # What `ckpt --show-completion` prints for each shell, and what the script then asks.
    runner = CliRunner()
    script = runner.invoke(app, [], env={"_CKPT_COMPLETE": f"source_{shell}"}, prog_name="ckpt")
    assert script.exit_code == 0 and marker in script.stdout
    env = {"_CKPT_COMPLETE": "complete_bash", "COMP_WORDS": "ckpt batches --la", "COMP_CWORD": "2"}
    words = runner.invoke(app, [], env=env, prog_name="ckpt")
    assert words.stdout.split() == ["--last"]


def test_the_package_says_the_version_pyproject_declares() -> None:
    import re

    import ckpt_cli

    found = re.search(r'^version = "([^"]+)"$', (REPO / "pyproject.toml").read_text(), re.M)
    assert found and ckpt_cli.__version__ == found.group(1)
