"""TAPAS repositories on the Hugging Face Hub: the files an import reads, fetched with huggingface_hub.

    snapshot = download_tapas_repo("google/tapas-base-finetuned-wtq", revision="main")
    snapshot.directory   # huggingface_hub's cached snapshot: config.json, model.safetensors, vocab.txt
    snapshot.commit      # the commit that the revision pointed at

Each file comes with `hf_hub_download` (a HEAD, then a GET, of
`{endpoint}/{repo_id}/resolve/{revision}/{filename}`), so huggingface_hub's cache
(`HF_HUB_CACHE`), its resumed downloads, revisions (branches, tags, commits, `refs/pr/N`),
tokens (`HF_TOKEN`, `hf auth login`), `HF_ENDPOINT` and `HF_HUB_OFFLINE` work as for any Hub
model; a model that transformers already downloaded is not downloaded again. The environment
variables are read at each call. After config.json every file is asked for at the commit that
config.json came from, so a branch that moves meanwhile cannot mix two versions.

config.json is checked before any weights are downloaded (`check_config`): it must describe a TAPAS
model of the task asked for (a question-answering model, or a two-label TabFact classifier for
`task="classification"`) whose options tapas-tf reproduces. The weights are
read from safetensors only (`model.safetensors`, or `model.safetensors.index.json` and its
shards): a repository with only `pytorch_model.bin` is refused, because that file is a pickle,
which can run code when it is loaded. `vocab.txt` is taken when the repository has one.

Every refusal or failure is a `HubError` (a ValueError) with a one-line message.
"""

import dataclasses
import json
import logging
import os
import re
import socket
import urllib.parse
import urllib.request
from typing import Any, Callable, List, Mapping, Optional, Tuple

from tapas_tf.checkpoints import hf

VOCAB_FILE = "vocab.txt"
QA_ARCHITECTURE = "TapasForQuestionAnswering"
CLASSIFIER_ARCHITECTURE = "TapasForSequenceClassification"
# What released models are for: answering questions (TableQA), or judging statements (TabFact's
# two-label classifiers, TableFactChecker).
QUESTION_ANSWERING = "question_answering"
CLASSIFICATION = "classification"
TASKS = (QUESTION_ANSWERING, CLASSIFICATION)
# What the other TAPAS architectures are, for the refusal.
OTHER_ARCHITECTURES = {
    "TapasForMaskedLM": "a pre-trained masked-LM checkpoint without question-answering heads "
                        "(fine-tune it first)",
    "TapasForSequenceClassification": "a table classifier (TabFact's: is a statement true of the table?), "
                                      "which answers no questions: judge statements with it through "
                                      "TableFactChecker.from_pretrained",
    "TapasModel": "a bare encoder without heads",
}
EXAMPLE_QA_MODEL = "google/tapas-base-finetuned-wtq"
EXAMPLE_TABFACT_MODEL = "google/tapas-base-finetuned-tabfact"
TABFACT_LABELS = 2  # refuted, entailed
HTTP_LOGGERS = ("httpx2", "httpx", "urllib3")  # Those of huggingface_hub 2, 1 and 0.
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_TRUE = {"1", "ON", "YES", "TRUE"}


class HubError(ValueError):
    """A Hub repository that cannot be downloaded or imported; the message is one line."""


@dataclasses.dataclass(frozen=True)
class HubSnapshot:
    """The files of one commit of a repository, in huggingface_hub's cache."""

    repo_id: str
    revision: str
    commit: str
    directory: str
    files: Tuple[str, ...]


def hub_offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set to a true value, read now."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().upper() in _TRUE


def hub_endpoint() -> str:
    """The Hub's address: HF_ENDPOINT, read now, else huggingface_hub's default."""
    from huggingface_hub import constants  # pylint: disable=import-outside-toplevel

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def check_task(task: str) -> str:
    """`task` if it is one of TASKS; ValueError otherwise."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    return task


def check_config(hf_config: Mapping[str, Any], repo_id: str, task: str = QUESTION_ANSWERING) -> None:
    """Refuses a config.json that is not a TAPAS model of `task` that tapas-tf can import.

    Raises:
      HubError: another model_type; for question answering a masked-LM, classification or
        bare-encoder architecture; for classification anything but a TapasForSequenceClassification
        with 2 labels; an option tapas-tf does not reproduce (`hf.tapas_config_from_hf`'s refusals).
    """
    check_task(task)
    model_type = hf_config.get("model_type", "tapas")
    if model_type != "tapas":
        raise HubError(f"{repo_id} is a {model_type!r} model, not TAPAS: tapas-tf imports TAPAS checkpoints "
                       "only")
    architectures = list(hf_config.get("architectures") or ())
    if task == CLASSIFICATION:
        _check_classifier(hf_config, architectures, repo_id)
    elif architectures and QA_ARCHITECTURE not in architectures:
        what = OTHER_ARCHITECTURES.get(architectures[0], "not a question-answering model")
        raise HubError(f"{repo_id} is a {architectures[0]}, {what}; asking a table needs a {QA_ARCHITECTURE} "
                       f"(e.g. {EXAMPLE_QA_MODEL})")
    try:
        hf.tapas_config_from_hf(hf_config)
    except ValueError as e:
        raise HubError(f"{repo_id}: {_one_line(e)}") from None


def check_question_answering_config(hf_config: Mapping[str, Any], repo_id: str) -> None:
    """`check_config` for a question-answering model."""
    check_config(hf_config, repo_id, QUESTION_ANSWERING)


def _check_classifier(hf_config: Mapping[str, Any], architectures: List[str], repo_id: str) -> None:
    """A TabFact classifier: a TapasForSequenceClassification with 2 labels."""
    if CLASSIFIER_ARCHITECTURE not in architectures:
        if QA_ARCHITECTURE in architectures:
            raise HubError(f"{repo_id} is a {QA_ARCHITECTURE}, a question-answering model, which judges no "
                           "statements: ask it questions through TableQA.from_pretrained, or take a TabFact "
                           f"classifier (e.g. {EXAMPLE_TABFACT_MODEL})")
        what = f"a {architectures[0]}" if architectures else "a model whose config.json names no architecture"
        raise HubError(f"{repo_id} is {what}, not a table classifier; judging statements needs a "
                       f"{CLASSIFIER_ARCHITECTURE} (e.g. {EXAMPLE_TABFACT_MODEL})")
    labels = hf.num_labels(hf_config)
    if labels != TABFACT_LABELS:
        raise HubError(f"{repo_id} is a {CLASSIFIER_ARCHITECTURE} with {labels} labels; a TabFact classifier "
                       "has 2 (refuted, entailed)")


def download_tapas_repo(repo_id: str, revision: Optional[str] = None, token: Optional[str] = None,
                        task: str = QUESTION_ANSWERING) -> HubSnapshot:
    """Downloads (or finds in huggingface_hub's cache) what importing `repo_id` needs.

    Args:
      repo_id: e.g. "google/tapas-base-finetuned-wtq".
      revision: a branch, tag or commit; default "main".
      token: a Hub token; default huggingface_hub's (HF_TOKEN, or the one `hf auth login` stored).
      task: QUESTION_ANSWERING or CLASSIFICATION, what the model must be (`check_config`).

    Returns:
      The snapshot: config.json, the safetensors weights and vocab.txt (when the repository has one).

    Raises:
      HubError: no such repository or revision, no network (or HF_HUB_OFFLINE) and no cached copy,
        a config.json that `check_config` refuses, or no safetensors weights.
    """
    check_task(task)
    revision = revision or "main"
    config_path = _fetcher(repo_id, revision, token)("config.json")
    commit = _commit_of(config_path, revision)
    with open(config_path, encoding="utf-8") as f:
        try:
            hf_config = json.load(f)
        except ValueError as e:
            raise HubError(f"{repo_id}: config.json is not JSON ({e})") from None
    if not isinstance(hf_config, dict):
        raise HubError(f"{repo_id}: config.json does not hold a JSON object")
    check_config(hf_config, repo_id, task)
    fetch = _fetcher(repo_id, commit, token)
    weights = _download_weights(fetch, repo_id, revision, commit, token)
    vocab = fetch(VOCAB_FILE, optional=True)
    files = [config_path] + weights + ([vocab] if vocab else [])
    return HubSnapshot(repo_id=repo_id, revision=revision, commit=commit,
                       directory=os.path.dirname(config_path),
                       files=tuple(os.path.basename(path) for path in files))


def _download_weights(fetch: Callable[..., Optional[str]], repo_id: str, revision: str, commit: str,
                      token: Optional[str]) -> List[str]:
    """The safetensors file, or the index and its shards; HubError when there are none."""
    single = fetch(hf.SAFETENSORS_FILE, optional=True)
    if single:
        return [single]
    index = fetch(hf.SAFETENSORS_INDEX_FILE, optional=True)
    if index:
        try:
            with open(index, encoding="utf-8") as f:
                shards = sorted(set(json.load(f)["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise HubError(f"{repo_id}@{revision}: {hf.SAFETENSORS_INDEX_FILE} has no weight_map "
                           f"({e!r})") from None
        return [index] + [fetch(shard) for shard in shards]
    if _remote_file_exists(repo_id, hf.PYTORCH_FILE, commit, token):
        raise HubError(
            f"{repo_id}@{revision} has its weights only as {hf.PYTORCH_FILE}, a pickle that can run code "
            f"when it is loaded, and tapas-tf reads only {hf.SAFETENSORS_FILE} from the Hub; choose a "
            f"revision that has it ({repo_id}@REVISION), or convert the file where PyTorch is installed and "
            "import the directory with tapas-tf import --format=hf")
    raise HubError(f"{repo_id}@{revision} has no {hf.SAFETENSORS_FILE}: no weights tapas-tf can import")


def _fetcher(repo_id: str, revision: str, token: Optional[str]) -> Callable[..., Optional[str]]:
    """fetch(filename, optional=False) -> the cached file's path, or None for an optional file the
    repository lacks; every error a one-line HubError."""
    from huggingface_hub import hf_hub_download  # pylint: disable=import-outside-toplevel

    offline = hub_offline()
    unreachable = None if offline else unreachable_reason(hub_endpoint())
    _quiet_http_loggers()

    def fetch(filename: str, optional: bool = False) -> Optional[str]:
        try:
            # An endpoint that does not answer a connection is not asked (huggingface_hub would retry it
            # for half a minute): the cache answers, or the error says at once what to do.
            return hf_hub_download(repo_id, filename, revision=revision, token=token, endpoint=hub_endpoint(),
                                   cache_dir=os.environ.get("HF_HUB_CACHE") or None,
                                   local_files_only=offline or unreachable is not None)
        except Exception as e:  # pylint: disable=broad-except  (every failure becomes one line)
            if optional and _is_remote_missing(e):
                return None
            if filename == VOCAB_FILE and unreachable and _not_cached(e):
                return None  # Whether the repository has one cannot be known; the default vocabulary serves.
            raise _hub_error(e, repo_id, revision, filename, offline, unreachable) from None

    return fetch


# Seconds to wait for a TCP connection to the Hub (or the proxy) before calling it unreachable.
CONNECT_TIMEOUT = 3.0
# What a user without network can do instead (`_hub_error`).
WAYS_OUT = ("set HF_HUB_OFFLINE=1 to use only cached models, or download the repository where there is "
            "network and import its directory: tapas-tf import --format=hf --source=DIR --model_dir=DIR")


def unreachable_reason(endpoint: str) -> Optional[str]:
    """None if a TCP connection to `endpoint` (or to the HTTPS/HTTP proxy the environment names for it)
    opens within CONNECT_TIMEOUT seconds, else why not ("connection refused", "timed out", ...)."""
    parsed = urllib.parse.urlsplit(endpoint)
    host, port = parsed.hostname, parsed.port or (443 if parsed.scheme == "https" else 80)
    if not host:
        return None  # Not a URL we can probe: let huggingface_hub say what is wrong.
    proxy = urllib.request.getproxies().get(parsed.scheme)
    if proxy and not urllib.request.proxy_bypass(host):
        proxied = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        host, port = proxied.hostname or host, proxied.port or 80
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT):
            return None
    except socket.timeout:
        return f"no answer from {host}:{port} in {CONNECT_TIMEOUT:g} s"
    except OSError as e:
        return f"{host}:{port}: {e.strerror or type(e).__name__}"


def _not_cached(error: Exception) -> bool:
    from huggingface_hub import utils as errors  # pylint: disable=import-outside-toplevel

    return isinstance(error, errors.LocalEntryNotFoundError)


def _quiet_http_loggers() -> None:
    """huggingface_hub's HTTP clients log every request at INFO; only warnings, unless a level was chosen."""
    for name in HTTP_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.WARNING)


def _remote_file_exists(repo_id: str, filename: str, commit: str, token: Optional[str]) -> bool:
    from huggingface_hub import HfApi  # pylint: disable=import-outside-toplevel

    try:
        return HfApi(endpoint=hub_endpoint()).file_exists(repo_id, filename, revision=commit, token=token)
    except Exception:  # pylint: disable=broad-except  (only decides which refusal to give)
        return False


def _is_remote_missing(error: Exception) -> bool:
    """The Hub answered that the file is not in the repository (not: it is not cached)."""
    from huggingface_hub import utils as errors  # pylint: disable=import-outside-toplevel  (0.x and later)

    return (isinstance(error, errors.EntryNotFoundError)
            and not isinstance(error, errors.LocalEntryNotFoundError))


def _hub_error(error: Exception, repo_id: str, revision: str, filename: str, offline: bool,
               unreachable: Optional[str] = None) -> HubError:
    """The one-line HubError for what `hf_hub_download` raised (`unreachable`: why the endpoint was
    not asked)."""
    from huggingface_hub import utils as errors  # pylint: disable=import-outside-toplevel  (0.x and later)

    endpoint = hub_endpoint()
    if isinstance(error, errors.GatedRepoError):
        return HubError(f"{repo_id} is a gated repository: accept its conditions on {endpoint} and log in "
                        "(hf auth login, or HF_TOKEN)")
    if isinstance(error, errors.RepositoryNotFoundError):
        return HubError(f"{repo_id}: no such model repository on {endpoint} (a private one needs a token: "
                        "hf auth login, or HF_TOKEN)")
    if isinstance(error, errors.RevisionNotFoundError):
        return HubError(f"{repo_id} has no revision {revision!r} on {endpoint}")
    if isinstance(error, errors.LocalEntryNotFoundError):
        if offline:
            return HubError(f"{repo_id}@{revision}: {filename} is not in the Hugging Face cache, and "
                            "HF_HUB_OFFLINE forbids downloading it; run once online first, or import a "
                            "downloaded copy: tapas-tf import --format=hf --source=DIR --model_dir=DIR")
        cause = error.__cause__ or error.__context__
        detail = f" ({unreachable})" if unreachable else f" ({type(cause).__name__})" if cause is not None else ""
        return HubError(f"{repo_id}@{revision}: cannot reach {endpoint}{detail}, and {filename} is not in "
                        f"the Hugging Face cache; {WAYS_OUT}")
    if isinstance(error, errors.EntryNotFoundError):
        return HubError(f"{repo_id}@{revision} has no {filename}")
    if isinstance(error, errors.HfHubHTTPError):
        status = getattr(getattr(error, "response", None), "status_code", "an error")
        return HubError(f"{repo_id}@{revision}: {endpoint} answered HTTP {status} for {filename}")
    return HubError(f"{repo_id}@{revision}: downloading {filename} failed: {type(error).__name__}: "
                    f"{_one_line(error)}")


def _commit_of(path: str, revision: str) -> str:
    """The commit of a file in huggingface_hub's cache (`.../snapshots/COMMIT/file`), else `revision`."""
    folder = os.path.basename(os.path.dirname(path))
    return folder if _COMMIT.match(folder) else revision


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__
