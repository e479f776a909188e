"""Loading the modules that register tasks of your own: `--task_module=my_task.py` (a file) or
`--task_module=my_package.tasks` (a module on the Python path, or in the working directory).

The command lines find these arguments before they define their flags (`task_module_arguments`),
so that `--task` offers the tasks the modules register, and `--help` lists them.

A module loaded from a file is imported under its file's name (`my_task`). The create_data job
runs in this process by default, where that name resolves; a runner with worker processes
(--runner=..., --direct_running_mode=multi_processing) needs the module importable on the workers:
name it as a module of an installed package or on PYTHONPATH.
"""

import importlib
import importlib.util
import os
import sys
from types import ModuleType
from typing import List, Sequence

FLAG = "task_module"


class TaskModuleError(ValueError):
    """The module cannot be found or loaded (an error inside it is raised as it is)."""


def task_module_arguments(argv: Sequence[str]) -> List[str]:
    """The values of --task_module in `argv` (argv[0] is the program): `--task_module=X` or
    `--task_module X`, in order, up to a `--`."""
    found: List[str] = []
    arguments = list(argv[1:])
    i = 0
    while i < len(arguments):
        argument = arguments[i]
        if argument == "--":
            break
        name, equals, value = argument.lstrip("-").partition("=")
        if argument.startswith("-") and name == FLAG:
            if equals:
                found.append(value)
            elif i + 1 < len(arguments):
                found.append(arguments[i + 1])
                i += 1
            else:
                found.append("")
        i += 1
    return found


def load_task_module(name_or_path: str) -> ModuleType:
    """Imports a module that registers tasks: a `.py` file (or any path with a separator) or a
    dotted module name; a module loaded already is not run again.

    Raises:
      TaskModuleError: the file or module does not exist, or another module holds the file's name.
      Any error the module itself raises (a registration it gets wrong: ValueError).
    """
    if not name_or_path:
        raise TaskModuleError("names no module: give a .py file or a module name")
    if name_or_path.endswith(".py") or os.sep in name_or_path or "/" in name_or_path:
        return _load_file(name_or_path)
    return _import_name(name_or_path)


def _load_file(path: str) -> ModuleType:
    if not os.path.isfile(path):
        raise TaskModuleError(f"{path}: no such file")
    path = os.path.abspath(path)
    name = os.path.splitext(os.path.basename(path))[0]
    loaded = sys.modules.get(name)
    if loaded is not None:
        if os.path.abspath(getattr(loaded, "__file__", "") or "") == path:
            return loaded
        raise TaskModuleError(f"{path}: a module named {name} is imported already (from "
                         f"{getattr(loaded, '__file__', None) or 'built in'}); rename the file")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TaskModuleError(f"{path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    # Under its name in sys.modules first: Beam pickles the task's reader by module and name.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _import_name(name: str) -> ModuleType:
    # The command lines run as scripts, whose path starts at their own folder: the user's
    # working directory is looked in last, so that it never hides an installed package.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and (name == e.name or name.startswith(e.name + ".")):
            raise TaskModuleError(f"{name}: no module of that name in the working directory or on the "
                             "Python path (or give its .py file)") from None
        raise
