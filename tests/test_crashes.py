"""Bad input never ends as "internal error": errors crossing worker processes and Spark
tasks, JSON nested deeper than anything can read, malformed ``-o`` values, and passwords in
URLs (issue #14 items 6, 7, 8, 14)."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
import shutil
from pathlib import Path
from typing import Any

import pytest

import ckpt_cli
from ckpt_cli import engine, secrets
from ckpt_cli.cli.common import parse_storage_options
from ckpt_cli.engine import LocalEngine, SparkEngine
from ckpt_cli.errors import CkptError, FormatError
from ckpt_cli.storage import Storage
from tests.conftest import CASES, CASES_DIR, CliResult, run_cli
from tests.servers import S3Server, free_port

pytestmark = pytest.mark.skipif(not CASES, reason="no fixtures")

HDFS = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"


def one_line_error(result: CliResult) -> str:
    """Exit 2 and one ``error:`` line (and maybe a hint) on stderr; no traceback."""
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert lines and lines[0].startswith("error: "), result.stderr
    assert len(lines) <= 2 and (len(lines) == 1 or lines[1].startswith("hint: ")), lines
    assert "Traceback" not in result.stderr + result.stdout
    assert "internal error" not in result.stderr
    return lines[0]


def copy_hdfs(tmp_path: Path) -> Path:
    root = tmp_path / "ckpt"
    shutil.copytree(HDFS, root)
    return root


def damage_latest_delta(root: Path, partition: int) -> str:
    """Overwrite the first block header of the newest delta of ``partition``: lz4 lengths
    no reader accepts."""
    deltas = (root / "state" / "0" / str(partition)).glob("*.delta")
    newest = max(deltas, key=lambda p: int(p.name.split(".")[0]))
    data = bytearray(newest.read_bytes())
    data[10:20] = b"\xff" * 10
    newest.write_bytes(bytes(data))
    return f"state/0/{partition}/{newest.name}"


# -- item 6: errors cross process and Spark-task boundaries ---------------------------------


@pytest.mark.parametrize("best_effort", [False, True], ids=["plain", "best-effort"])
def test_corrupt_delta_in_worker_processes_is_one_line(tmp_path: Path, best_effort: bool) -> None:
    root = copy_hdfs(tmp_path)
    damaged = damage_latest_delta(root, 1)
    # Two partitions and two workers on local files: each partition in its own process.
    args = ["replay", str(root), "--format", "jsonl", "--workers", "2"]
    if best_effort:
        # The damaged delta is found before a row is read: the partition falls back to its
        # newest version that loads, and stderr says so, naming the file.
        result = run_cli(*args, "--best-effort")
        assert result.exit_code == 0 and result.stdout
        assert "partition 1: version" in result.stderr and damaged in result.stderr
        return
    line = one_line_error(run_cli(*args))
    assert damaged in line and "lz4" in line


def test_corrupt_delta_in_dataset_worker_processes_is_one_line(tmp_path: Path) -> None:
    root = copy_hdfs(tmp_path)
    damaged = damage_latest_delta(root, 0)
    args = ["replay", str(root), "-O", f"{tmp_path}/out/", "--workers", "2"]
    assert damaged in one_line_error(run_cli(*args))


def _import_all() -> None:
    for module in pkgutil.walk_packages(ckpt_cli.__path__, "ckpt_cli."):
        if not module.name.endswith("__main__"):  # it runs the CLI
            importlib.import_module(module.name)


def _subclasses(cls: type[BaseException]) -> list[type[BaseException]]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


_import_all()
# Every exception class of the package, CkptError's family and the private ones alike: any
# may be raised in a worker process or a Spark task.
EXCEPTION_CLASSES = sorted(
    {c for c in _subclasses(Exception) if c.__module__.split(".")[0] == "ckpt_cli"},
    key=lambda c: f"{c.__module__}.{c.__qualname__}",
)
SAMPLES: dict[str, Any] = {
    "message": "state/0/1/7.delta: something is wrong",
    "path": "state/0/1/7.delta",
    "problem": "bad block",
    "offset": 12,
    "line": None,
    "hint": "try again",
    "reason": "LINEAGE_MISMATCH",
    "paths": ("state/0/1/7.zip",),
    "names": {"where": "--where"},
}


def _instance(cls: type[BaseException]) -> BaseException:
    """An instance with every constructor argument set (a new argument needs a sample)."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    if not any("__init__" in vars(k) for k in cls.__mro__ if k.__module__ != "builtins"):
        return cls(SAMPLES["message"])
    for name, param in inspect.signature(cls).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            if param.kind is param.VAR_POSITIONAL:
                args.append(SAMPLES["message"])
            continue
        assert name in SAMPLES, f"{cls.__qualname__}({name}=...): add a sample value here"
        if param.kind is param.KEYWORD_ONLY:
            kwargs[name] = SAMPLES[name]
        else:
            args.append(SAMPLES[name])
    return cls(*args, **kwargs)


def test_exception_classes_are_found() -> None:
    names = {c.__name__ for c in EXCEPTION_CLASSES}
    assert {"CkptError", "FormatError", "ChecksumMismatchError", "StateUnavailable"} <= names


@pytest.mark.parametrize("cls", EXCEPTION_CLASSES, ids=lambda c: c.__qualname__)
def test_every_exception_class_round_trips_through_pickle(cls: type[BaseException]) -> None:
    exc = _instance(cls)
    copy = pickle.loads(pickle.dumps(exc))
    assert type(copy) is cls
    assert copy.args == exc.args and str(copy) == str(exc)
    assert copy.__dict__ == exc.__dict__  # message, hint, path, offset, reason, paths...
    if isinstance(exc, CkptError):
        assert isinstance(copy, CkptError) and copy.to_json() == exc.to_json()


def _fail_on_three(unit: int) -> int:
    if unit == 3:
        raise FormatError(f"offsets/{unit}", "unreadable", line=2, hint="look at it")
    return unit


def test_local_engine_processes_return_the_error() -> None:
    with pytest.raises(FormatError) as info:
        LocalEngine(2).map(_fail_on_three, list(range(8)), cpu_bound=True)
    assert info.value.path == "offsets/3" and info.value.line == 2
    assert info.value.hint == "look at it"


class _PickledRdd:
    """Just enough of a SparkContext: tasks run here, results come back pickled."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def map(self, fn: Any) -> _PickledRdd:
        return _PickledRdd([fn(i) for i in self.items])

    def collect(self) -> list[Any]:
        items: list[Any] = pickle.loads(pickle.dumps(self.items))
        return items


class _FakeSession:
    class sparkContext:  # noqa: N801 - SparkSession's attribute name
        defaultParallelism = 2

        @staticmethod
        def parallelize(items: list[Any], numSlices: int) -> _PickledRdd:  # noqa: N803
            return _PickledRdd(items)


def test_spark_task_error_reaches_the_driver_as_itself() -> None:
    # A CkptError raised in a task comes back as the task's result, then is raised again.
    failed = engine._run_partition((_fail_on_three, None, (), [1, 3, 5]))
    assert isinstance(failed, engine._TaskFailed) and failed.position == 1
    with pytest.raises(FormatError, match=r"^offsets/3 \(line 2\): unreadable$"):
        SparkEngine(_FakeSession(), slices=3).map(_fail_on_three, list(range(8)))
    assert SparkEngine(_FakeSession(), slices=3).map(_fail_on_three, [0, 1, 2]) == [0, 1, 2]


# -- item 7: JSON nested deeper than anything reads ------------------------------------------

NESTED = "[" * 100_000


def nest(root: Path, target: str) -> str:
    """Replace one JSON line of ``target`` with ``[`` x 100000; return the file's path."""
    if target == "metadata":
        (root / "metadata").write_text(NESTED)
        return "metadata"
    kind, line = target.split(":")
    newest = max((root / kind).iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    lines = newest.read_text().split("\n")
    lines[int(line)] = NESTED
    newest.write_text("\n".join(lines))
    return f"{kind}/{newest.name}"


TARGETS = ["metadata", "offsets:1", "offsets:2", "commits:1"]  # offsets:2 is a source offset
COMMANDS = ["versions", "validate", "replay", "orphans", "cleanup", "repair", "inspect"]
# Commands that do not read the file at all (replay reads state, not the query id or the
# commit's body) may succeed.
MAY_SUCCEED = {("replay", "metadata"), ("replay", "commits:1")}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("command", COMMANDS)
def test_deeply_nested_json_is_a_corrupt_file(tmp_path: Path, command: str, target: str) -> None:
    root = copy_hdfs(tmp_path)
    damaged = nest(root, target)
    where = [str(root / damaged)] if command == "inspect" else [str(root)]
    result = run_cli(command, *where, *(["--format", "jsonl"] if command == "replay" else []))
    output = result.stdout + result.stderr
    assert "internal error" not in output and "Traceback" not in output
    if result.exit_code == 2:
        assert damaged in one_line_error(result)
        assert "nested too deeply" in result.stderr
    elif command in ("validate", "inspect", "repair"):
        # validate's contract: an unreadable log file is a CORRUPT_* finding, exit 1; inspect
        # reports the damaged file; repair plans the rollback past it.
        assert result.exit_code == 1, output
        if command != "repair":
            assert "nested too deeply" in " ".join(output.split())
    elif command == "versions":
        # versions describes what it can read; its headline names the file as the reason the
        # query cannot restart.
        assert result.exit_code == 0 and "restartable: no" in output, output
        assert damaged in " ".join(output.split()) or "(and " in output
    else:
        assert (command, target) in MAY_SUCCEED and result.exit_code == 0, output


def test_validate_json_names_the_nested_file(tmp_path: Path) -> None:
    root = copy_hdfs(tmp_path)
    damaged = nest(root, "offsets:1")
    result = run_cli("validate", str(root), "--json")
    assert result.exit_code == 1
    findings = [f for f in result.json()["findings"] if damaged in f["message"]]
    assert findings and findings[0]["code"] == "CORRUPT_OFFSETS"


def test_deeply_nested_repair_manifest_is_one_line(tmp_path: Path) -> None:
    root = copy_hdfs(tmp_path)
    damage_latest_delta(root, 1)
    applied = run_cli("repair", str(root), "--apply", "--yes", "--force", "--json")
    assert applied.exit_code == 0, applied.stderr
    manifest = Path(applied.json()["result"]["manifest"])
    manifest.write_text('{"changes": ' + NESTED)
    assert str(manifest) in one_line_error(
        run_cli("repair", str(root), "--undo", "--manifest", str(manifest))
    )


# -- item 8: -o values -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ("config_kwargs={bad", "config_kwargs"),
        ('config_kwargs="text"', "config_kwargs"),
        ("client_kwargs=[1]", "client_kwargs"),
        ("client_kwargs=eu-west-3", "client_kwargs"),
        (f"client_kwargs={NESTED}", "client_kwargs"),
        ("read_timeout=soon", "read_timeout"),
        ("connect_timeout=true", "connect_timeout"),
        ("max_attempts=1.5", "max_attempts"),
        ("retries=x", "retries"),
    ],
)
def test_malformed_storage_option_is_one_line(option: str, named: str) -> None:
    # Nothing listens on the endpoint: the value is refused before any request.
    endpoint = f"endpoint_url=http://127.0.0.1:{free_port()}"
    result = run_cli("versions", "s3://bucket/q", "-S", endpoint, "-S", option)
    assert named in one_line_error(result)


def test_kwargs_options_are_mappings() -> None:
    options = parse_storage_options(
        ['client_kwargs={"region_name": "eu-west-3"}', 'config_kwargs={"read_timeout": 7}']
    )
    assert options == {
        "client_kwargs": {"region_name": "eu-west-3"},
        "config_kwargs": {"read_timeout": 7},
    }
    # The library refuses JSON text where a mapping goes, whoever calls it.
    with pytest.raises(CkptError, match="client_kwargs: expected a mapping"):
        Storage.from_url("s3://bucket/q", {"client_kwargs": '{"region_name": "eu-west-3"}'})


def test_secrets_inside_json_options_are_masked() -> None:
    parse_storage_options(['client_kwargs={"aws_secret_access_key": "hush-hush-123"}'])
    assert "hush-hush-123" not in secrets.scrub("signed with hush-hush-123")


@pytest.mark.s3
def test_kwargs_options_reach_the_s3_client(s3_server: S3Server) -> None:
    url = s3_server.upload(HDFS, "ckpt-tests", f"kwargs-{free_port()}")
    raw = [
        f"endpoint_url={s3_server.endpoint}",
        'client_kwargs={"region_name": "eu-west-3"}',
        'config_kwargs={"read_timeout": 7, "connect_timeout": 3}',
    ]
    storage = Storage.from_url(url, parse_storage_options(raw))
    assert storage.read_bytes("metadata") == (HDFS / "metadata").read_bytes()
    client = storage.fs.s3
    assert client.meta.region_name == "eu-west-3"
    assert (client.meta.config.read_timeout, client.meta.config.connect_timeout) == (7, 3)
    result = run_cli("versions", url, *[a for o in raw for a in ("-S", o)], "--json")
    assert result.exit_code == 0, result.stderr


@pytest.mark.s3
def test_s3_options_reach_the_dataset_output(s3_server: S3Server) -> None:
    # ckpt's own S3 options (bounded waiting) were passed raw to s3fs for --output.
    opts = ["-S", "max_attempts=1", "-S", "read_timeout=5", "-S", "retries=1"]
    out = f"s3://ckpt-tests/out-{free_port()}/"
    args = ["replay", str(HDFS), "-O", out, *opts]
    result = run_cli(*args, *s3_server.cli_options(), "--json")
    assert result.exit_code == 0, result.stderr
    assert len(s3_server.fs().find(out.removeprefix("s3://"))) == 2  # one file a partition
    refused = ["-S", f"endpoint_url=http://127.0.0.1:{free_port()}"]
    line = one_line_error(run_cli(*args, *refused, "-S", "connect_timeout=1"))
    assert "partition_id=" in line and "could not connect" in line


# -- item 14: passwords in URLs --------------------------------------------------------------


def test_scrub_masks_url_passwords_in_other_libraries_text() -> None:
    secrets.remember_urls("s3://user:PASS@bucket/q")
    botocore = 'Invalid bucket name "user:PASS@bucket": Bucket name must match the regex'
    assert "PASS" not in secrets.scrub(botocore)
    # Any URL's password, even one never seen; an abfs container@account is no password.
    assert secrets.scrub("GET http://u:hunter2@host:9/x") == "GET http://u:***@host:9/x"
    abfs = "abfss://container@account.dfs.core.windows.net/ckpt"
    assert secrets.scrub(abfs) == abfs


@pytest.mark.s3
@pytest.mark.parametrize("endpoint", ["refused", "live"])
def test_url_password_never_printed(s3_server: S3Server, endpoint: str) -> None:
    url = s3_server.endpoint if endpoint == "live" else f"http://127.0.0.1:{free_port()}"
    for extra in ([], ["--json"]):
        args = ["--debug", "validate", "s3://user:PASS@bucket/q", "-S", f"endpoint_url={url}"]
        result = run_cli(*args, *extra)
        assert result.exit_code == 2
        assert "PASS" not in result.stdout + result.stderr
        assert "cannot carry credentials" in result.stderr


@pytest.mark.s3
def test_endpoint_password_never_printed(s3_server: S3Server) -> None:
    for url in (s3_server.endpoint, f"http://127.0.0.1:{free_port()}"):
        endpoint = url.replace("http://", "http://ckpt:Secret-Word-9@")
        args = ["--debug", "versions", "s3://ckpt-tests/q", "-S", f"endpoint_url={endpoint}"]
        result = run_cli(*args, "-S", "max_attempts=1", "--json")
        assert result.exit_code == 2
        assert "Secret-Word-9" not in result.stdout + result.stderr
