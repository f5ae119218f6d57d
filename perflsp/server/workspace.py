"""Workspace folders, their configuration (last good one kept), file filters and include paths.

The LSP side (asking the client, showing messages) is in `app.py`; this holds the state.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr

from perflsp.analysis.reader import ReadContext
from perflsp.kernels.compile_db import DiscoveredDatabases
from perflsp.kernels.includes import IncludeResolver
from perflsp.llm.secrets import register_secret
from perflsp.server.config import (
    CONFIG_FILE,
    ConfigProblem,
    Layer,
    Origin,
    ResolvedConfig,
    client_values,
    read_config_file,
    resolve,
)
from perflsp.server.text import path_of
from perflsp.source.parser import is_source_path

log = logging.getLogger(__name__)

# The key from the editor's secret storage, as the server process's environment (VS Code passes it
# so; it never travels in a protocol message that a client trace would log).
API_KEY_ENV = "PERFLSP_LLM_API_KEY"
# initializationOptions keys that are not settings
_CLIENT_KEYS = ("workspaceTrusted", "workspace_trusted", "settings", "llmApiKey", "llm_api_key")


@dataclass
class Folder:
    uri: str
    path: Path | None
    workspace_settings: dict[str, object] = field(default_factory=dict)  # from workspace/configuration
    config: ResolvedConfig | None = None  # last good
    generation: int = 0


class WorkspaceState:
    def __init__(self, folders: list[tuple[str, Path | None]], init_options: object):
        self.folders = [Folder(uri, path) for uri, path in folders]
        if not self.folders:
            self.folders.append(Folder("", None))  # files opened without a workspace
        raw = init_options if isinstance(init_options, Mapping) else {}
        self.client_trusted = bool(raw.get("workspaceTrusted") or raw.get("workspace_trusted"))
        # The LLM API key from the editor's secret storage: kept as a SecretStr (repr shows
        # stars), masked in every log record from now on, never part of the settings.
        self.api_key: SecretStr | None = None
        secret = raw.get("llmApiKey") or raw.get("llm_api_key") or os.environ.get(API_KEY_ENV)
        if isinstance(secret, str) and secret:
            register_secret(secret)
            self.api_key = SecretStr(secret)
        settings = raw.get("settings", raw)
        self.init_settings = client_values(
            {k: v for k, v in settings.items() if k not in _CLIENT_KEYS} if isinstance(settings, Mapping) else {})
        self.pushed: dict[str, object] = {}  # settings pushed by didChangeConfiguration
        self.session: dict[str, object] = {}  # overrides set by commands (perflsp.setGpus)
        self.shown: set[str] = set()  # problems already shown to the user
        self._resolvers: dict[tuple[str, tuple[str, ...]], IncludeResolver] = {}  # (folder uri, compile flags)
        self.compile_db = DiscoveredDatabases()  # each file's build flags (compile_commands.json)
        self._generation = 0
        self.last_problems: list[str] = []

    # ------------------------------------------------------------------ folders

    def folder_for(self, uri: str) -> Folder:
        best: Folder | None = None
        for folder in self.folders:
            inside = folder.uri and (uri == folder.uri or uri.startswith(folder.uri.rstrip("/") + "/"))
            if inside and (best is None or len(folder.uri) > len(best.uri)):
                best = folder
        return best or self.folders[0]

    def add_folder(self, uri: str) -> Folder:
        folder = Folder(uri, path_of(uri))
        self.folders = [f for f in self.folders if f.uri] + [folder]
        return folder

    def remove_folder(self, uri: str) -> None:
        self.folders = [f for f in self.folders if f.uri != uri] or [Folder("", None)]

    # ------------------------------------------------------------------ configuration

    def layers(self, folder: Folder) -> list[Layer]:
        layers = [Layer(Origin.INIT_OPTIONS, "initializationOptions", self.init_settings)]
        if self.pushed:
            layers.append(Layer(Origin.CLIENT_PUSH, "didChangeConfiguration", self.pushed))
        if folder.workspace_settings:
            layers.append(Layer(Origin.WORKSPACE, "workspace/configuration", folder.workspace_settings))
        file_layer = read_config_file(folder.path)
        if file_layer is not None:
            layers.append(file_layer)
        if self.session:
            layers.append(Layer(Origin.CLIENT_PUSH, "perflsp.setGpus", self.session))
        return layers

    def refresh(self, folder: Folder, known_rules: set[str] | None) -> tuple[bool, list[str]]:
        """Re-resolve one folder's configuration: (changed, new problems to show)."""
        try:
            layers = self.layers(folder)
            self._generation += 1
            config = resolve(layers, client_trusted=self.client_trusted, root=folder.path,
                             known_rules=known_rules, generation=self._generation)
        except ConfigProblem as exc:
            fresh = [p for p in exc.problems if p not in self.shown]
            self.shown.update(exc.problems)
            self.last_problems = exc.problems
            if folder.config is None:  # nothing good yet: the defaults
                folder.config = resolve([], root=folder.path, generation=self._generation)
                return True, fresh
            return False, fresh
        self.last_problems = []
        fresh = [p for p in config.ignored if p not in self.shown]
        self.shown.update(config.ignored)
        changed = folder.config is None or _fingerprint(folder.config) != _fingerprint(config)
        if changed:
            folder.config = config
        return changed, fresh

    def config_for(self, uri: str) -> ResolvedConfig:
        folder = self.folder_for(uri)
        if folder.config is None:
            self.refresh(folder, None)
        assert folder.config is not None
        return folder.config

    # ------------------------------------------------------------------ files

    def document_enabled(self, uri: str, config: ResolvedConfig) -> bool:
        settings = config.settings
        if not settings.enable:
            return False
        path = path_of(uri)
        if path is None:
            return True  # untitled buffers: analyse
        folder = self.folder_for(uri)
        relative = _relative(path, folder.path)
        if settings.exclude and _matches(settings.exclude, relative):
            return False
        if settings.include:
            return _matches(settings.include, relative)
        return True

    def reading_for(self, uri: str) -> ReadContext:
        """What a document or file of the workspace is read with (as `perflsp check` reads it):
        its folder's include resolver and its flags from the compile database its folders lead
        to (found as clangd finds it)."""
        path = path_of(uri)
        return ReadContext.of(path, self.resolver_for(uri), self.compile_db)

    def resolver_for(self, uri: str) -> IncludeResolver:
        config = self.config_for(uri)
        folder = self.folder_for(uri)
        key = (folder.uri, tuple(config.settings.compile_flags))
        resolver = self._resolvers.get(key)
        if resolver is None:
            defines, include_dirs = compile_flag_macros(config.settings.compile_flags, folder.path)
            resolver = IncludeResolver(include_dirs=tuple(include_dirs), defines=defines)
            self._resolvers[key] = resolver
        return resolver

    def forget_headers(self) -> None:
        """A header (or a compile database) changed on disk: read headers and databases again."""
        self._resolvers.clear()
        self.compile_db = DiscoveredDatabases()

    def forget_files(self) -> None:
        """Documents closed: drop what the include resolvers read of other files (the open
        documents' resolvers read it again when they next need it)."""
        for resolver in self._resolvers.values():
            resolver.forget()

    @property
    def remembered_files(self) -> int:
        return sum(r.remembered for r in self._resolvers.values())

    def source_files(self, folder: Folder, config: ResolvedConfig) -> list[Path]:
        if folder.path is None or not folder.path.is_dir():
            return []
        from perflsp.source.files import iter_source_paths

        out = []
        for path in iter_source_paths([folder.path]):
            if isinstance(path, Path) and is_source_path(path):
                uri = path.as_uri()
                if self.document_enabled(uri, config):
                    out.append(path)
        return out


def _fingerprint(config: ResolvedConfig) -> tuple[str, tuple[str, ...], bool]:
    return (config.settings.model_dump_json(), config.gpu_ids, config.workspace_trusted)


def _relative(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return path.as_posix().lstrip("/")


def _matches(patterns: list[str], relative: str) -> bool:
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(patterns).match_file(relative)


def compile_flag_macros(flags: list[str], root: Path | None) -> tuple[dict[str, str], list[Path]]:
    """`-DNAME[=VALUE]`, `-D NAME`, `-I dir`, `-Idir` (relative to the folder); other flags are ignored."""
    defines: dict[str, str] = {}
    dirs: list[Path] = []
    i = 0
    while i < len(flags):
        flag = flags[i]
        value = None
        for prefix in ("-D", "-I", "-U", "--define-macro", "--include-path"):
            if flag == prefix and i + 1 < len(flags):
                value, kind = flags[i + 1], prefix
                i += 1
                break
            if (flag.startswith(prefix) and len(flag) > len(prefix) and not flag.startswith("--")) or (
                    flag.startswith(prefix + "=") and prefix.startswith("--")):
                value, kind = flag[len(prefix):].lstrip("="), prefix
                break
        else:
            kind = None
        i += 1
        if value is None or kind is None:
            continue
        if kind in ("-D", "--define-macro"):
            name, _, body = value.partition("=")
            defines[name.strip()] = body if _ else "1"
        elif kind == "-U":
            defines.pop(value.strip(), None)
        else:
            path = Path(value).expanduser()
            if not path.is_absolute() and root is not None:
                path = root / path
            dirs.append(path)
    return defines, dirs


__all__ = ["CONFIG_FILE", "Folder", "WorkspaceState", "compile_flag_macros"]
