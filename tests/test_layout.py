"""The package reads as its data flow, and imports run down it.

    data -> (wikipedia) -> features -> models -> checkpoints -> training / inference -> qa -> serving
                            \\-> pipelines (Beam) -> beam_jobs
    ... -> commands (`tapas-tf` and every command line) -> the aliases (root `ask`, `serve`)

Every module of `tapas_tf` (with `tapas_tf.models` and `tapas_tf.beam_jobs`, which packaging maps
from the repository's top-level folders) is imported, and its import statements, including
those inside functions, are checked against `ALLOWED`. An arrow that runs back up fails here, and
so do modules that import each other, directly or round a loop (inside functions too): files of one
folder, where `ALLOWED` says nothing, and of two folders or rooms.
"""

import ast
import importlib
import importlib.util
import os
import pkgutil
import shutil
import subprocess
import sys
import types
import zipfile
from typing import Collection, Dict, List, Mapping, Set

import pytest

import tapas_tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Room -> the rooms of tapas_tf it may import (its own room is always allowed).
ALLOWED = {
    "data": set(),
    "wikipedia": {"data"},
    "features": {"data", "config_fields"},
    "models": {"features.example_features"},
    "checkpoints": {"models", "task_registry.presets", "features.vocab"},  # vocab: a BERT's, made TAPAS's.
    "pipelines": {"data", "wikipedia", "features", "task_registry.presets", "cli"},
    "training": {"features", "models", "checkpoints", "task_registry.presets", "config_fields"},
    "inference": {"data", "features", "models", "checkpoints", "task_registry.presets", "config_fields"},  # Batch
    # prediction and metrics.
    # Table collections, sparse and dense retrieval, the vector index: below the ask API, which asks what it finds.
    "retrieval": {"data", "features", "models", "checkpoints"},
    "qa": {"data", "features", "models", "checkpoints", "task_registry.presets", "inference", "retrieval"},  # The ask API on pandas tables.
    "serving": {"data", "features", "models", "checkpoints", "task_registry.presets", "inference", "qa",
                "retrieval"},  # Export, web page.
    "config_fields": set(),
    # Each task once: its preset (presets: the paper's tasks and hyper-parameters), reader, evaluation, modes.
    "task_registry": {"data", "features"},
    "cli": set(),
    "beam_jobs": {"data", "wikipedia", "features", "pipelines", "task_registry", "cli", "config_fields"},
    # On top: the installed command and the task command line import every room and the root
    # command lines they run; nothing imports them.
    "commands": {"data", "wikipedia", "features", "models", "checkpoints", "pipelines", "training",
                 "inference", "qa", "retrieval", "serving", "task_registry", "cli", "beam_jobs"},
}
SUBPACKAGES = {"data", "wikipedia", "features", "models", "checkpoints", "pipelines", "training", "inference",
               "retrieval", "qa", "serving",
               "beam_jobs", "commands", "task_registry", "cli"}
# Root modules beside __init__: a config's field with its flag's help (`config_fields`: no imports
# of ours, so the configs of every room may use it), and the aliases `python -m tapas_tf.ask`,
# `python -m tapas_tf.serve`, ... of commands in `commands/` (earlier releases' entry points).
SHARED_ROOT_MODULES = {"config_fields"}
ROOT_MODULES = SHARED_ROOT_MODULES | {"ask", "serve", "sample_data", "import_checkpoint", "init_from_bert"}
CLI_MAX_LINES = 60


def _all_modules():
    """Every module name of the installed package, mapped folders included."""
    names = ["tapas_tf"]
    for package in ("tapas_tf", "tapas_tf.models", "tapas_tf.beam_jobs"):
        module = importlib.import_module(package)
        names.append(package)
        names.extend(info.name for info in pkgutil.walk_packages(module.__path__, package + "."))
    return sorted(set(names))


MODULES = _all_modules()


def _room(module_name: str) -> str:
    """`tapas_tf.features.tokenization` -> `features`; root modules are their own room."""
    parts = module_name.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imported_tapas_modules(module) -> set:
    """Absolute names of the tapas_tf modules that `module`'s source imports, anywhere in it."""
    with open(module.__file__, encoding="utf-8") as f:
        tree = ast.parse(f.read(), module.__file__)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{module.__name__}: use absolute imports"
            found.add(node.module)
            # `from tapas_tf.x import y` may import the submodule y.
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name and (name == "tapas_tf" or name.startswith("tapas_tf."))
            and _is_module(name)}


def _is_module(name: str) -> bool:
    return name in MODULES


# Modules that the rooms below their own import, so they must import nothing of ours.
LEAF_MODULES = {"tapas_tf.task_registry.presets"}


def _allowed(importer: str, imported: str) -> bool:
    room = _room(importer)
    if importer in LEAF_MODULES:
        return False
    if importer == "tapas_tf" or room in ROOT_MODULES - SHARED_ROOT_MODULES:
        return True  # The public API surface and the command lines sit on top.
    if imported == "tapas_tf":
        return False  # ...so no room may import them.
    if _room(imported) == room:
        return True
    target = imported[len("tapas_tf."):]
    return any(target == allowed or target.startswith(allowed + ".") for allowed in ALLOWED[room])


def test_the_walk_finds_every_room():
    rooms = {_room(name) for name in MODULES if name.count(".") >= 1}
    assert SUBPACKAGES <= rooms
    assert {"tapas_tf.models.qa_model", "tapas_tf.beam_jobs.create_task_data",
            "tapas_tf.data.readers.sqa", "tapas_tf.inference.execution", "tapas_tf.qa.table_qa",
            "tapas_tf.serving.web_app",
            "tapas_tf.commands.run_task", "tapas_tf.commands.dispatch"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_module_imports_and_its_imports_run_down_the_flow(name):
    module = importlib.import_module(name)
    wrong = sorted(imported for imported in _imported_tapas_modules(module) if not _allowed(name, imported))
    room = _room(name) or "root"
    assert not wrong, f"{name} ({room}) may import only {sorted(ALLOWED.get(room, []))}, but imports {wrong}"


def test_the_checker_rejects_an_arrow_back_up():
    assert not _allowed("tapas_tf.data.readers.wtq", "tapas_tf.inference.decoding")
    assert not _allowed("tapas_tf.features.tokenization", "tapas_tf.models.config")
    assert not _allowed("tapas_tf.models.embeddings", "tapas_tf.features.tokenization")
    assert not _allowed("tapas_tf.checkpoints.importer", "tapas_tf.training.trainer")
    assert not _allowed("tapas_tf.training.trainer", "tapas_tf.inference.sequential")
    assert not _allowed("tapas_tf.task_registry.presets", "tapas_tf.data.interaction_io")
    assert _allowed("tapas_tf.checkpoints.importer", "tapas_tf.task_registry.presets")
    assert not _allowed("tapas_tf.checkpoints.importer", "tapas_tf.task_registry.registry")
    assert not _allowed("tapas_tf.qa.table_qa", "tapas_tf.commands.run_task")
    assert not _allowed("tapas_tf.cli", "tapas_tf.commands.dispatch")
    assert not _allowed("tapas_tf.cli.runner", "tapas_tf.commands.run_task")
    assert not _allowed("tapas_tf.beam_jobs.create_pretrain_data", "tapas_tf.commands.dispatch")
    assert _allowed("tapas_tf.ask", "tapas_tf.commands.dispatch")
    assert not _allowed("tapas_tf.commands.dispatch", "tapas_tf.ask")
    assert _allowed("tapas_tf.models.embeddings", "tapas_tf.features.example_features")
    assert _allowed("tapas_tf.inference.sequential", "tapas_tf.features.classifier_examples")
    assert not _allowed("tapas_tf.inference.decoding", "tapas_tf.qa.table_qa")
    assert not _allowed("tapas_tf.qa.table_qa", "tapas_tf.serving.web_app")
    assert _allowed("tapas_tf.serving.web_app", "tapas_tf.qa.table_qa")
    assert _allowed("tapas_tf.qa.ask_results", "tapas_tf.inference.execution")
    assert not _allowed("tapas_tf.retrieval.collection", "tapas_tf.qa.tables")
    assert not _allowed("tapas_tf.retrieval.collection", "tapas_tf.inference.decoding")
    assert _allowed("tapas_tf.retrieval.collection", "tapas_tf.data.table_files")
    assert _allowed("tapas_tf.qa.table_qa", "tapas_tf.retrieval.collection")


def test_the_checker_sees_an_arrow_back_up_inside_a_function(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    from tapas_tf.inference import decoding\n    return decoding\n")
    module = types.SimpleNamespace(__name__="tapas_tf.data.planted", __file__=str(planted))
    imported = _imported_tapas_modules(module)
    assert imported == {"tapas_tf.inference", "tapas_tf.inference.decoding"}
    assert not any(_allowed(module.__name__, name) for name in imported)


# --- no circles: not between the files of one folder, nor of two ------------------------------


def _file_imports(path: str, known: Collection[str]) -> Set[str]:
    """The modules of `known` that the source at `path` imports anywhere (inside functions too).

    `from P import x` imports the module P.x when there is one, else P: importing a submodule is
    not counted as depending on its package's `__init__`.
    """
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in known else node.module)
    return found & set(known)


def import_graph(files: Mapping[str, str]) -> Dict[str, Set[str]]:
    """{module: the other modules of `files` that it imports} for `files`, {module name: path}."""
    return {name: _file_imports(path, files) - {name} for name, path in files.items()}


def circles(graph: Mapping[str, Set[str]]) -> List[List[str]]:
    """The groups of modules that import each other, directly or round a loop (the strongly
    connected components of more than one module, Tarjan's algorithm), each sorted, in order."""
    index: Dict[str, int] = {}
    lowest: Dict[str, int] = {}
    stack: List[str] = []
    found = []

    def visit(name: str) -> None:
        index[name] = lowest[name] = len(index)
        stack.append(name)
        for other in sorted(graph.get(name, ())):
            if other not in index:
                visit(other)
                lowest[name] = min(lowest[name], lowest[other])
            elif other in stack:
                lowest[name] = min(lowest[name], index[other])
        if lowest[name] == index[name]:
            group = []
            while not group or group[-1] != name:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(found)


def assert_no_circles(files: Mapping[str, str]) -> None:
    graph = import_graph(files)
    found = circles(graph)
    described = ["; ".join(f"{name} -> {', '.join(sorted(graph[name] & set(group)))}" for name in group)
                 for group in found]
    assert not found, f"modules import each other: {' | '.join(described)}"


def test_no_modules_import_each_other():
    files = {name: importlib.util.find_spec(name).origin for name in MODULES}
    assert_no_circles(files)


def test_the_circle_checker_fails_on_planted_circles(tmp_path):
    sources = {
        "__init__.py": "",
        "a.py": "from planted import b\n",
        "b.py": "def lazy():\n    from planted import a\n    return a\n",  # In a function: a circle.
        "c.py": "import planted.a\n",  # Imports into the circle; not part of it.
        "x.py": "import planted.y\n",
        "y.py": "from planted.z import VALUE\n",
        "z.py": "VALUE = 1\n\ndef later():\n    import planted.x\n",
        "deep/__init__.py": "",
        "deep/d.py": "import planted.c\n",  # Another folder, and no way back: no circle.
        "deep/e.py": "from planted import f\n",
        "f.py": "def later():\n    from planted.deep import e\n",  # A circle across two folders.
    }
    for relative, source in sources.items():
        (tmp_path / "planted" / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "planted" / relative).write_text(source)
    files = {"planted." + relative[:-len(".py")].replace("/", "."): str(tmp_path / "planted" / relative)
             for relative in sources if not relative.endswith("__init__.py")}
    files["planted"] = str(tmp_path / "planted" / "__init__.py")
    files["planted.deep"] = str(tmp_path / "planted" / "deep" / "__init__.py")
    graph = import_graph(files)
    assert graph["planted.b"] == {"planted.a"} and graph["planted.deep.d"] == {"planted.c"}
    assert circles(graph) == [["planted.a", "planted.b"], ["planted.deep.e", "planted.f"],
                              ["planted.x", "planted.y", "planted.z"]]
    with pytest.raises(AssertionError, match="planted.a -> planted.b; planted.b -> planted.a"):
        assert_no_circles(files)
    for name in ("b.py", "f.py", "z.py"):
        (tmp_path / "planted" / name).write_text("VALUE = 2\n")
    assert_no_circles(files)

def test_package_root_holds_only_the_api_presets_and_thin_command_lines():
    package_dir = os.path.dirname(tapas_tf.__file__)
    modules = {name[:-3] for name in os.listdir(package_dir) if name.endswith(".py")}
    assert modules == ROOT_MODULES | {"__init__"}
    subpackages = {name for name in os.listdir(package_dir)
                   if os.path.isfile(os.path.join(package_dir, name, "__init__.py"))}
    assert subpackages == SUBPACKAGES - {"models", "beam_jobs"}
    for cli in ROOT_MODULES - SHARED_ROOT_MODULES:
        with open(os.path.join(package_dir, cli + ".py"), encoding="utf-8") as f:
            assert len(f.readlines()) <= CLI_MAX_LINES, f"tapas_tf/{cli}.py should only parse flags and call"


def test_run_task_at_the_root_is_a_shim_over_the_package():
    # The checkout's command line; its logic is installed (tapas_tf.commands.run_task).
    with open(os.path.join(ROOT, "run_task.py"), encoding="utf-8") as f:
        source = f.read()
    assert len(source.splitlines()) <= CLI_MAX_LINES
    assert "from tapas_tf.commands import run_task" in source and "flags.DEFINE" not in source


@pytest.mark.parametrize("package", sorted(SUBPACKAGES))
def test_every_subpackage_says_what_it_holds_and_may_import(package):
    doc = importlib.import_module(f"tapas_tf.{package}").__doc__ or ""
    assert len(doc.split()) >= 15, f"tapas_tf.{package} needs a docstring saying what it holds"
    if package != "beam_jobs":
        assert "May import" in doc


def test_public_api_is_lazy_and_complete():
    for name in tapas_tf.__all__:
        assert getattr(tapas_tf, name) is not None
    assert tapas_tf.load_model.__module__ == "tapas_tf.checkpoints.model_dir"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tapas_tf.nope  # noqa: B018
    result = subprocess.run([sys.executable, "-c", "import sys, tapas_tf; print('tensorflow' in sys.modules)"],
                            capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


# --- A user's project with its own `models` package ---------------------------------------------


@pytest.fixture
def user_project(tmp_path):
    """A working directory holding its own `models/` package, as many ML projects do."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("OWNER = 'user'\n")
    (tmp_path / "models" / "config.py").write_text("OWNER = 'user config'\n")
    return tmp_path


def _run(args, cwd, timeout=300):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def test_user_models_package_and_ours_do_not_mix(user_project):
    result = _run([sys.executable, "-c",
                   "import models, models.config, tapas_tf.models.config as ours\n"
                   "print(models.OWNER, '|', models.config.OWNER, '|', ours.TapasConfig.__name__)"],
                  cwd=user_project)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "user | user config | TapasConfig"


def test_run_task_works_from_a_directory_with_its_own_models_package(user_project):
    run_task = os.path.join(ROOT, "run_task.py")
    result = _run([sys.executable, run_task, "--help"], cwd=user_project)
    assert result.returncode == 0, result.stderr
    assert "--task" in result.stdout + result.stderr
    sample = _run([sys.executable, "-m", "tapas_tf.commands.dispatch", "sample-data", "--output_dir=sample"],
                  cwd=user_project)
    assert sample.returncode == 0, sample.stderr
    result = _run([sys.executable, run_task, "--task=SQA", "--mode=create_data", "--input_dir=sample",
                   "--output_dir=out", "--max_seq_length=128"], cwd=user_project)
    assert result.returncode == 0, result.stderr
    assert (user_project / "out" / "tf_examples" / "train.tfrecord").stat().st_size > 0
    assert (user_project / "out" / "conversion_report.json").exists()


def test_wheel_has_one_top_level_package(tmp_path):
    # Built from a copy: setuptools writes build/ beside the sources.
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "requirements.txt"):  # requirements.txt: the dependencies
        shutil.copy(os.path.join(ROOT, name), source / name)
    for name in ("tapas_tf", "models", "beam_jobs"):
        shutil.copytree(os.path.join(ROOT, name), source / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    result = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                   "-w", str(tmp_path), str(source)], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (wheel,) = [name for name in os.listdir(tmp_path) if name.endswith(".whl")]
    with zipfile.ZipFile(tmp_path / wheel) as archive:
        names = archive.namelist()
        (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
        entry_points = archive.read(entry_points).decode()
        (metadata,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        metadata = archive.read(metadata).decode()
    # A wheel installed alone brings the pinned set its commands import.
    for requirement in ("tensorflow==2.20.0", "apache-beam[gcp]==2.77.0", "ai-edge-litert==2.3.0"):
        assert f"Requires-Dist: {requirement}" in metadata.splitlines(), metadata[:3000]
    # The installed command (`tapas-tf`), with the task command line that run_task.py is a shim over.
    assert "[console_scripts]" in entry_points
    assert "tapas-tf = tapas_tf.commands.dispatch:main" in entry_points.splitlines()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"tapas_tf"}
    assert "models" not in top_level and "beam_jobs" not in top_level
    for path in ("tapas_tf/models/qa_model.py", "tapas_tf/beam_jobs/create_task_data.py",
                 "tapas_tf/data/protos/interaction.proto", "tapas_tf/inference/execution.py",
                 "tapas_tf/serving/web_static/index.html", "tapas_tf/serving/web_static/app.js",
                 "tapas_tf/serving/web_static/style.css", "tapas_tf/serving/web_static/favicon.svg",
                 "tapas_tf/commands/dispatch.py", "tapas_tf/commands/run_task.py"):
        assert path in names


def _architecture_room_table() -> Dict[str, Set[str]]:
    """The "Which room may import which" table of docs/ARCHITECTURE.md: room -> rooms."""
    with open(os.path.join(ROOT, "docs", "ARCHITECTURE.md"), encoding="utf-8") as f:
        text = f.read()
    table = text[text.index("| room | may import |"):].split("\n\n", 1)[0].splitlines()[2:]
    rooms = {}
    for row in table:
        room, allowed = [cell.strip() for cell in row.strip("|").split("|")]
        rooms[room.strip("`")] = set() if allowed == "nothing of ours" else {
            name.strip(" `") for name in allowed.split(",")}
    return rooms


def test_architecture_page_says_what_the_checker_allows():
    assert _architecture_room_table() == ALLOWED


def test_architecture_page_places_every_room_and_root_module():
    with open(os.path.join(ROOT, "docs", "ARCHITECTURE.md"), encoding="utf-8") as f:
        text = f.read()
    layout = text[text.index("## Layout"):text.index("## Which room")]
    for package in SUBPACKAGES - {"models", "beam_jobs"}:
        assert f"tapas_tf/{package}/" in layout, f"docs/ARCHITECTURE.md's layout does not place tapas_tf/{package}/"
    for module in ROOT_MODULES:
        assert module in layout, f"docs/ARCHITECTURE.md's layout does not place tapas_tf/{module}.py"


def test_at_most_one_module_over_80_lines_at_the_package_root():
    package_dir = os.path.dirname(tapas_tf.__file__)
    sizes = {}
    for name in os.listdir(package_dir):
        if name.endswith(".py"):
            with open(os.path.join(package_dir, name), encoding="utf-8") as f:
                sizes[name] = len(f.readlines())
    assert len([name for name, lines in sizes.items() if lines > 80]) <= 1, sizes


def test_every_subpackage_is_in_the_wheel():
    """pyproject's explicit `packages` list must name every package, or an installed wheel lacks it."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    with open(root / "pyproject.toml", "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = {"tapas_tf." + ".".join(p.parent.relative_to(root / "tapas_tf").parts)
             for p in (root / "tapas_tf").rglob("__init__.py") if p.parent != root / "tapas_tf"}
    assert not found - listed, f"packages missing from pyproject.toml: {sorted(found - listed)}"
