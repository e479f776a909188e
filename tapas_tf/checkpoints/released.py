"""Released TAPAS models by name: downloaded and imported once, then loaded from a cache.

    from tapas_tf.checkpoints import released
    model_dir = released.released_model_dir("google/tapas-base-finetuned-wtq")         # a Hub repository
    model_dir = released.released_model_dir("google/tapas-base-finetuned-wtq@no_reset")  # ... at a revision
    model_dir = released.released_model_dir(                                # an original release zip
        "https://storage.googleapis.com/tapas_models/2020_10_07/"
        "tapas_wtq_wikisql_sqa_inter_masklm_base_reset.zip#sha256=HEX")

`TableQA.from_pretrained(NAME)` and the `--model=NAME` flag of `ask` and `serve` call it;
`TableFactChecker.from_pretrained(NAME)` calls it with `task="classification"`, for TabFact's table
classifiers (`google/tapas-base-finetuned-tabfact`, `.../tapas_tabfact_inter_masklm_base_reset.zip`).
A name is

- a Hugging Face Hub repository id, `ORG/NAME[@REVISION]` (or `revision=`): its config.json,
  safetensors weights and vocab.txt come through huggingface_hub (`hub`), and the `hf` importer
  takes every option from config.json;
- the http(s) address of one of Google's original release zips, optionally ending in
  `#sha256=HEX`: it is downloaded with resumption and a checksum check (`download`), and the `tf1`
  importer takes the task options from the release's name (`release_zip_options`: `tapas_sqa_*`,
  `tapas_wtq_wikisql_sqa_*`, `tapas_wikisql_sqa_*`, and `tapas_tabfact_*` for classification;
  `*_reset` restarts positions in every cell).

A model of the other kind than the one asked for (a TabFact classifier for `TableQA`, a
question-answering model for `TableFactChecker`), a masked-LM checkpoint or another model type is
refused in one line, saying what to use instead, before the weights are downloaded where the name or
config.json tells, after the import otherwise; a cached model is checked too. Every refusal or
failure is a `ReleasedModelError` (a ValueError) with a one-line message.

The imported model directory is cached under `$TAPAS_TF_CACHE/models/` (default
`~/.cache/tapas_tf/models/`): `hub/ORG--NAME/REVISION/` or `zip/STEM-URLHASH/`, with
`released.json` saying where it came from (the commit, or the zip's SHA-256, which is always
recorded) and what it is (`model_kind`: question_answering or classification). A later call
finds it there and makes no network request at all, so a branch such as
`main` is not looked up again: `force_download=True` imports it anew (files already in
huggingface_hub's cache are not downloaded again). `HF_HUB_OFFLINE=1` forbids downloads, of zips
too; a cached model loads as always. The import runs in a scratch directory that is renamed into
place, under a file lock, so concurrent calls import once and a crash leaves no half model.

Google's table retrievers (the dual encoders of DENSE_TABLE_RETRIEVER.md) have short names,
`RETRIEVER_RELEASES` (`tapas_nq_hn_retriever_tiny`, ...): `retriever_release(NAME)` gives the zip's
address on `$TAPAS_TF_RELEASE_HOST` (default https://storage.googleapis.com). They are imported by
`tapas_tf.checkpoints.retriever` (into a directory, or cached as here with `model_kind`
"dual_encoder"), through the same download (`downloaded_zip`) and cache (`import_once`); asked for
as a question-answering model or a classifier, one is refused in one line.
"""

import contextlib
import dataclasses
import datetime
import difflib
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import zipfile
import zlib
from typing import Any, Callable, Dict, Iterator, Optional, Tuple
from urllib.parse import quote, urlparse

from tapas_tf.checkpoints import download, hub, importer, model_dir as model_dir_lib
from tapas_tf.checkpoints.hub import CLASSIFICATION, QUESTION_ANSWERING
from tapas_tf.task_registry.presets import TABFACT_PRESET

MANIFEST_FILE = "released.json"
DEFAULT_REVISION = "main"
# The task of an original release, by the start of its name after "tapas_" (longest first).
RELEASE_TASKS = (("wtq_wikisql_sqa_", "WTQ"), ("wikisql_sqa_", "WIKISQL_SUPERVISED"), ("sqa_", "SQA"))
# A TabFact release (a table classifier), imported with tasks.TABFACT_PRESET's options.
CLASSIFIER_RELEASE = ("tabfact_", "TABFACT")
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
_SIZES = ("large", "base", "medium", "small", "mini", "tiny")
# Google's released table retrievers (TF1 dual encoders: `bert/` tables, `bert_1/` questions), by name:
# every zip that DENSE_TABLE_RETRIEVER.md of google-research/tapas lists (no mini or base size was
# released). `tapas_dual_encoder_proj_*` are the pre-trained ones (proj_0: no down projection),
# `tapas_nq_*retriever_*` those fine-tuned on Natural Questions tables (hn: with hard negatives).
RETRIEVER_RELEASE_PATH = "/tapas_models/2021_04_27/"
RETRIEVER_RELEASES = tuple(
    [f"tapas_nq_hn_retriever_{size}" for size in ("large", "medium", "small", "tiny")]
    + [f"tapas_nq_retriever_{size}" for size in ("large", "medium", "small", "tiny")]
    + ["tapas_dual_encoder_proj_0_large"]
    + [f"tapas_dual_encoder_proj_256_{size}" for size in ("large", "medium", "small", "tiny")]
)
RELEASE_HOST_ENV = "TAPAS_TF_RELEASE_HOST"
DEFAULT_RELEASE_HOST = "https://storage.googleapis.com"
# The `model_kind` of a cached retriever (released.json), as the `kind` of its embedder.json.
DUAL_ENCODER = "dual_encoder"
_RETRIEVER_STEM = re.compile(r"^tapas_(nq_(hn_)?retriever|dual_encoder_proj_\d+)_")

log = logging.getLogger(__name__)


class ReleasedModelError(ValueError):
    """A released model that cannot be downloaded or imported; the message is one line."""


@dataclasses.dataclass(frozen=True)
class Release:
    """A parsed name: a Hub repository at a revision, or a release zip's address with its digest."""

    kind: str  # "hub" or "zip"
    location: str  # The repository id, or the zip's address without its #fragment.
    revision: Optional[str] = None  # hub: as given (None: main).
    sha256: Optional[str] = None  # zip: the expected digest, when given.

    @property
    def display(self) -> str:
        """How answers name the model: `ORG/NAME[@REVISION]`, or the zip's name without `.zip`."""
        if self.kind == "zip":
            return _zip_stem(self.location)
        return f"{self.location}@{self.revision}" if self.revision else self.location


def parse_name(name: str, revision: Optional[str] = None) -> Release:
    """A Hub repository id (`ORG/NAME[@REVISION]`) or a release zip address (`https://...zip[#sha256=HEX]`).

    Raises:
      ReleasedModelError: an empty or malformed name, two different revisions, a revision for an
        address, or an address that is not http(s) or not a .zip.
    """
    text = (name or "").strip()
    if not text:
        raise ReleasedModelError("the model name is empty; give a Hugging Face repository id or a release "
                                 "zip address")
    scheme = urlparse(text).scheme.lower()
    if scheme in ("http", "https"):
        return _parse_address(text, revision)
    if "://" in text:
        raise ReleasedModelError(f"{text}: only http and https addresses are downloaded")
    if os.path.isfile(model_dir_lib.config_path(text)):
        raise ReleasedModelError(f"{text} is a tapas-tf model directory: load it with --model_dir "
                                 "(from_model_dir)")
    repo_id, at, named_revision = text.partition("@")
    if at and not named_revision:
        raise ReleasedModelError(f"{text}: the revision after '@' is empty")
    if at and revision and named_revision != revision:
        raise ReleasedModelError(f"{text} names revision {named_revision!r} but revision {revision!r} is "
                                 "given too")
    if not _REPO_ID.match(repo_id) or "--" in repo_id or ".." in repo_id:
        raise ReleasedModelError(f"{repo_id!r} is not a Hugging Face repository id (ORG/NAME, e.g. "
                                 f"{hub.EXAMPLE_QA_MODEL}) nor an http(s) address of a release zip")
    return Release("hub", repo_id, revision=named_revision if at else (revision or None))


def _parse_address(text: str, revision: Optional[str]) -> Release:
    url, _, fragment = text.partition("#")
    if revision:
        raise ReleasedModelError(f"{url}: a revision applies to Hugging Face repositories, not to a release "
                                 "address")
    if not urlparse(url).path.lower().endswith(".zip"):
        raise ReleasedModelError(f"{url}: a release address names a .zip file")
    sha256 = None
    if fragment:
        key, equals, value = fragment.partition("=")
        if key.lower() != "sha256" or not equals:
            raise ReleasedModelError(f"{text}: the only #fragment understood is #sha256=HEX")
        try:
            sha256 = download.check_sha256_hex(value)
        except download.DownloadError as e:
            raise ReleasedModelError(f"{text}: {e}") from None
    return Release("zip", url, sha256=sha256)


def is_retriever_stem(stem: str) -> bool:
    """True for the name of one of Google's table retrievers (`tapas_nq_hn_retriever_tiny`, ...)."""
    return stem in RETRIEVER_RELEASES or bool(_RETRIEVER_STEM.match(stem))


def release_host() -> str:
    """Where Google's release zips are served: `$TAPAS_TF_RELEASE_HOST`, default DEFAULT_RELEASE_HOST."""
    return (os.environ.get(RELEASE_HOST_ENV) or DEFAULT_RELEASE_HOST).rstrip("/")


def retriever_release(name: str) -> Release:
    """A released retriever: a name of RETRIEVER_RELEASES (optionally `#sha256=HEX`), or a zip's address.

    Raises:
      ReleasedModelError: an unknown name (with the nearest known one), or a malformed address.
    """
    text = (name or "").strip()
    if urlparse(text).scheme.lower() in ("http", "https") or "://" in text:
        return parse_name(text)
    stem, hash_sign, fragment = text.partition("#")
    if stem not in RETRIEVER_RELEASES:
        nearest = difflib.get_close_matches(stem, RETRIEVER_RELEASES, n=1)
        hint = f"; did you mean {nearest[0]}?" if nearest else ""
        raise ReleasedModelError(f"{stem!r} is not a released retriever{hint} (known: {', '.join(RETRIEVER_RELEASES)})")
    return _parse_address(f"{release_host()}{RETRIEVER_RELEASE_PATH}{stem}.zip{hash_sign}{fragment}", None)


def release_zip_options(url: str, task: str = QUESTION_ANSWERING) -> Tuple[str, bool]:
    """(task preset, reset_position_index_per_cell) of an original release, from its file name.

    `tapas_wtq_wikisql_sqa_inter_masklm_base_reset.zip` -> ("WTQ", True), and with
    task="classification" `tapas_tabfact_inter_masklm_tiny.zip` -> ("TABFACT", False). The release's
    files do not say either: its name does (the chain of fine-tuning tasks first, `_reset` last).

    Raises:
      ReleasedModelError: a release of the other kind than `task` (TabFact for question answering, a
        question-answering one for classification), a pre-trained (masked-LM) release, or a name that
        says no task.
    """
    hub.check_task(task)
    stem = _zip_stem(url)
    if is_retriever_stem(stem):
        raise ReleasedModelError(_wrong_kind(stem, DUAL_ENCODER))
    rest = stem[len("tapas_"):] if stem.startswith("tapas_") else None
    qa_task = next((name for prefix, name in RELEASE_TASKS if (rest or "").startswith(prefix)), None)
    is_classifier = rest is not None and rest.startswith(CLASSIFIER_RELEASE[0])
    if task == QUESTION_ANSWERING and qa_task:
        return qa_task, stem.endswith("_reset")
    if task == CLASSIFICATION and is_classifier:
        return CLASSIFIER_RELEASE[1], stem.endswith("_reset")
    if is_classifier:
        raise ReleasedModelError(f"{stem} is a TabFact table classifier (is a statement true of the "
                                 "table?), which answers no questions: judge statements with it through "
                                 "TableFactChecker.from_pretrained; asking a table needs an SQA, WTQ or "
                                 "WikiSQL model")
    if qa_task:
        raise ReleasedModelError(f"{stem} is a question-answering release ({qa_task}), which judges no "
                                 "statements: ask it questions through TableQA.from_pretrained, or take a "
                                 "TabFact release (tapas_tabfact_*)")
    wanted = ("an SQA, WTQ or WikiSQL release" if task == QUESTION_ANSWERING
              else "a TabFact release (tapas_tabfact_*)")
    if rest is not None and (rest.startswith(("masklm", "inter_masklm")) or rest.split("_")[0] in _SIZES):
        heads = "question-answering heads" if task == QUESTION_ANSWERING else "a classifier"
        raise ReleasedModelError(f"{stem} is a pre-trained (masked-LM) checkpoint without {heads}; "
                                 f"fine-tune it first, or take {wanted}")
    if task == CLASSIFICATION:
        raise ReleasedModelError(
            f"cannot tell from the name {stem} that it is a TabFact classifier (expected tapas_tabfact_*); "
            "import it with tapas-tf import --format=tf1 --model_options="
            "'{\"num_classification_labels\": 2, ...}' instead")
    raise ReleasedModelError(
        f"cannot tell from the name {stem} which task it was fine-tuned on (expected tapas_sqa_*, "
        "tapas_wtq_wikisql_sqa_* or tapas_wikisql_sqa_*); import it with "
        "tapas-tf import --format=tf1 --task=... instead")


def models_cache_dir() -> str:
    """`$TAPAS_TF_CACHE/models`, default `~/.cache/tapas_tf/models`."""
    root = os.environ.get("TAPAS_TF_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "tapas_tf"))
    return os.path.join(root, "models")


def cached_model_dir(release: Release) -> str:
    """Where the imported model of `release` is cached (whether or not it is there)."""
    if release.kind == "hub":
        return os.path.join(models_cache_dir(), "hub", release.location.replace("/", "--"),
                            quote(release.revision or DEFAULT_REVISION, safe=""))
    return os.path.join(models_cache_dir(), "zip", _zip_key(release.location))


def read_manifest(model_dir: str) -> Dict[str, Any]:
    """The `released.json` of a cached model directory."""
    with open(os.path.join(model_dir, MANIFEST_FILE), encoding="utf-8") as f:
        return json.load(f)


def released_model_dir(name: str, revision: Optional[str] = None, token: Optional[str] = None,
                       force_download: bool = False, task: str = QUESTION_ANSWERING) -> str:
    """The model directory of a released model, imported on first use and cached (see the module doc).

    Args:
      name: a Hub repository id (`ORG/NAME[@REVISION]`) or a release zip address (`...zip[#sha256=HEX]`).
      revision: a Hub revision (branch, tag or commit), instead of `@REVISION`.
      token: a Hub token for private or gated repositories; default huggingface_hub's own.
      force_download: import again even when cached.
      task: "question_answering" (TableQA) or "classification" (a two-label TabFact classifier,
        TableFactChecker): what the model must be.

    Raises:
      ReleasedModelError: see `parse_name`, `hub.download_tapas_repo`, `download.download_file`,
        `release_zip_options`; a damaged zip; an import that fails; a model not of `task`.
    """
    hub.check_task(task)
    release = parse_name(name, revision)

    def import_into(model_dir: str) -> Dict[str, Any]:
        if release.kind == "hub":
            return _import_hub(release, model_dir, token, task)
        return _import_zip(release, model_dir, task)

    return import_once(release, task, import_into, lambda final: _checked_cache(release, final, task),
                       force_download)


def import_once(release: Release, kind: str, import_into: Callable[[str], Dict[str, Any]],
                check_cached: Callable[[str], str], force_download: bool = False) -> str:
    """The cached model directory of `release`, made by `import_into` on first use (or when forced).

    Args:
      release: what is imported; `cached_model_dir(release)` is where.
      kind: the `model_kind` recorded in the manifest (question_answering, classification, dual_encoder).
      import_into: writes the model into the directory it is given and returns the manifest's fields.
      check_cached: given the cached directory, checks it is what was asked for and returns it.
      force_download: import again even when cached.

    The import runs in a scratch directory renamed into place, under a file lock (see the module doc).
    """
    final = cached_model_dir(release)
    if not force_download and os.path.exists(os.path.join(final, MANIFEST_FILE)):
        return check_cached(final)
    from filelock import FileLock  # pylint: disable=import-outside-toplevel  (huggingface_hub's dependency)

    key = os.path.relpath(final, models_cache_dir())
    lock_path = os.path.join(models_cache_dir(), ".locks", key + ".lock")
    os.makedirs(os.path.dirname(lock_path), exist_ok=True)
    with FileLock(lock_path):
        if not force_download and os.path.exists(os.path.join(final, MANIFEST_FILE)):
            return check_cached(final)  # Another process imported it meanwhile.
        return _import(release, final, import_into, kind)


def _checked_cache(release: Release, final: str, task: str) -> str:
    manifest = read_manifest(final)
    recorded = manifest.get("sha256")
    if release.sha256 and recorded != release.sha256:
        raise ReleasedModelError(f"{release.location}: the cached copy in {final} has SHA-256 {recorded}, "
                                 f"not the expected {release.sha256}; delete that directory to download it "
                                 "again")
    kind = manifest.get("model_kind") or _kind_of(final)
    if kind != task:
        raise ReleasedModelError(_wrong_kind(release.display, kind))
    return final


def _kind_of(model_dir: str) -> str:
    """What an imported model is: CLASSIFICATION when it has a classifier, else QUESTION_ANSWERING."""
    labels = model_dir_lib.load_config(model_dir).num_classification_labels
    return CLASSIFICATION if labels else QUESTION_ANSWERING


def _wrong_kind(display: str, kind: str) -> str:
    """The refusal of a model of `kind` asked for as the other kind: what to use instead."""
    if kind == DUAL_ENCODER:
        return (f"{display} is a table retriever (a dual encoder), which answers no questions and judges no "
                "statements: import it with tapas-tf import --format=tf1 --source=NAME, or "
                "tapas_tf.checkpoints.retriever.import_retriever")
    if kind == CLASSIFICATION:
        return (f"{display} is a TabFact table classifier (is a statement true of the table?), which answers "
                "no questions: judge statements with it through TableFactChecker.from_pretrained")
    return (f"{display} is a question-answering model, which judges no statements: ask it questions through "
            f"TableQA.from_pretrained, or take a TabFact classifier (e.g. {hub.EXAMPLE_TABFACT_MODEL})")


def _import(release: Release, final: str, import_into: Callable[[str], Dict[str, Any]], kind: str) -> str:
    """Downloads and imports `release` into a scratch directory, then renames it to `final`."""
    os.makedirs(os.path.dirname(final), exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=".importing-", dir=os.path.dirname(final))
    try:
        model_dir = os.path.join(scratch, "model")
        manifest = import_into(model_dir)
        imported = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        manifest.update(name=release.display, model_kind=kind, imported=imported)
        with open(os.path.join(model_dir, MANIFEST_FILE), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=2, sort_keys=True)
            f.write("\n")
        if os.path.exists(final):  # force_download: the old copy goes once the new one is complete.
            os.rename(final, os.path.join(scratch, "old"))
        os.rename(model_dir, final)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    log.info("Imported %s into %s", release.display, final)
    return final


def _import_hub(release: Release, model_dir: str, token: Optional[str], task: str) -> Dict[str, Any]:
    try:
        snapshot = hub.download_tapas_repo(release.location, release.revision, token, task=task)
    except hub.HubError as e:
        raise ReleasedModelError(str(e)) from None
    log.info("Importing %s (commit %s)", release.display, snapshot.commit)
    report = _run_importer(release, task, "hf", snapshot.directory, model_dir)
    return dict(source="hub", repo_id=snapshot.repo_id, revision=snapshot.revision, commit=snapshot.commit,
                endpoint=hub.hub_endpoint(), files=list(snapshot.files), model_class=report["model_class"])


def _import_zip(release: Release, model_dir: str, kind: str) -> Dict[str, Any]:
    # Before downloading: a wrong kind fails at once.
    task, reset = release_zip_options(release.location, kind)
    with downloaded_zip(release) as (zip_path, digest):
        log.info("Importing %s (SHA-256 %s)", release.display, digest)
        options = {"reset_position_index_per_cell": reset}
        if kind == CLASSIFICATION:  # TABFACT is no importer --task: its preset's options, given here.
            options = {**importer.preset_options(TABFACT_PRESET), **options}
            preset = None
        else:
            preset = task
        report = _run_importer(release, kind, "tf1", zip_path, model_dir, task=preset, model_options=options)
    return dict(source="zip", url=release.location, sha256=digest, task=task,
                reset_position_index_per_cell=reset, model_class=report["model_class"])


@contextlib.contextmanager
def downloaded_zip(release: Release) -> Iterator[Tuple[str, str]]:
    """(path, SHA-256) of `release`'s zip, downloaded into the cache's downloads/ and CRC-checked.

    The zip is deleted when the block ends (what is kept is the import); the `.part` of an
    interrupted download stays, so the next call resumes it.

    Raises:
      ReleasedModelError: HF_HUB_OFFLINE is set, or the download fails or is no valid zip.
    """
    if hub.hub_offline():
        raise ReleasedModelError(f"{release.location} is not in the cache and HF_HUB_OFFLINE forbids "
                                 "downloading it")
    zip_path = os.path.join(models_cache_dir(), "downloads", _zip_key(release.location) + ".zip")
    try:
        digest = download.download_file(release.location, zip_path, release.sha256)
        _check_zip(zip_path, release.location)
        yield zip_path, digest
    except download.DownloadError as e:
        raise ReleasedModelError(str(e)) from None
    finally:
        if os.path.exists(zip_path):
            os.remove(zip_path)


def _check_zip(path: str, url: str) -> None:
    """Reads every member's CRC; a damaged or cut-short zip is deleted and refused."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
        reason = f"member {bad} fails its CRC check" if bad else None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as e:
        reason = " ".join(str(e).split()) or type(e).__name__
    if reason:
        os.remove(path)
        raise ReleasedModelError(f"{url}: the download is not a valid zip file ({reason}): cut short or "
                                 "damaged at the source; it was deleted")


def _run_importer(release: Release, kind: str, fmt: str, source: str, model_dir: str,
                  **options) -> Dict[str, Any]:
    """`importer.import_checkpoint`, refusing a model that is not of `kind` (question answering, or a
    two-label classifier)."""
    # Not the INFO lines of TensorFlow's checkpoint writer.
    loggers = [logging.getLogger(name) for name in ("absl", "tensorflow")]
    levels = [logger.level for logger in loggers]
    for logger, level in zip(loggers, levels):
        logger.setLevel(max(level, logging.WARNING))
    try:
        report = importer.import_checkpoint(fmt, source, model_dir, **options)
    except (ValueError, FileNotFoundError) as e:
        message = " ".join(str(e).split())
        raise ReleasedModelError(f"{release.display} cannot be imported: {message}") from None
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
    wanted = "question-answering model" if kind == QUESTION_ANSWERING else "TabFact classifier"
    example = hub.EXAMPLE_QA_MODEL if kind == QUESTION_ANSWERING else hub.EXAMPLE_TABFACT_MODEL
    if report["model_class"] != "TapasForQuestionAnswering":
        raise ReleasedModelError(f"{release.display} holds a {report['model_class']}, not a {wanted}; "
                                 f"fine-tune it first, or take a fine-tuned one (e.g. {example})")
    labels = model_dir_lib.load_config(model_dir).num_classification_labels
    if kind == CLASSIFICATION and labels != hub.TABFACT_LABELS:
        raise ReleasedModelError(f"{release.display} has {labels} classification labels, not a {wanted}'s 2 "
                                 f"(refuted, entailed); take a TabFact one (e.g. {example})")
    if kind == QUESTION_ANSWERING and labels:
        raise ReleasedModelError(_wrong_kind(release.display, CLASSIFICATION))
    return report


def _zip_stem(url: str) -> str:
    name = os.path.basename(urlparse(url).path)
    return name[:-len(".zip")] if name.lower().endswith(".zip") else name


def _zip_key(url: str) -> str:
    """`STEM-HASH`: readable, and distinct for two addresses of the same file name."""
    return f"{_zip_stem(url)}-{hashlib.sha256(url.encode('utf-8')).hexdigest()[:12]}"
