"""The settings model: the single source of truth for every `perflsp.*` setting.

On the wire (VS Code settings, `workspace/configuration`, `initializationOptions`) keys are
camelCase under `perflsp.`; `.perflsp.toml` accepts camelCase or snake_case. The VS Code
extension's `contributes.configuration` and docs/settings.md are generated from this module:

    python -m perflsp.server.settings --vscode-schema   # JSON for package.json
    python -m perflsp.server.settings --docs            # Markdown for docs/settings.md

Each field carries `scope` (VS Code's setting scope) and `trusted` (honoured only from user
settings or a trusted workspace: the setting sends code off the machine or runs a program).
The `llm` and `profiling` sections reuse the models of those layers; their field documentation
lives in `SECTION_FIELDS` below so that every setting is documented here, once.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Literal, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict, JsonValue
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonSchemaValue

from perflsp.analysis.roofline_rules import ROOFLINE_CODES as ROOFLINE_CODES  # re-exported for server.config
from perflsp.analysis.rules import RULES, rule_doc_url
from perflsp.llm.config import LlmSettings
from perflsp.profiling.settings import PRIVILEGED_FIELDS as PROFILING_PRIVILEGED
from perflsp.profiling.settings import ProfilingSettings

RuleLevel = Literal["error", "warning", "information", "hint", "off"]  # perflsp.analysis.rules.LEVELS (a test checks)
LogLevel = Literal["error", "warning", "info", "debug"]
Scope = Literal["application", "machine", "machine-overridable", "window", "resource"]

DEFAULT_GPUS = ("h100",)  # the H100 SXM5 80GB: the most common datacenter GPU of current clusters
_LEVEL_ALIASES = {"info": "information", "warn": "warning", "none": "off", "disabled": "off", "disable": "off"}


def _meta(scope: Scope, trusted: bool = False, example: JsonValue = None) -> JsonDict:
    extra: JsonDict = {"scope": scope, "trusted": trusted}
    if example is not None:
        extra["example"] = example
    return extra


class Settings(BaseModel):
    """`perflsp.*` settings, snake_case here."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    enable: bool = Field(
        True,
        description="Analyse CUDA and OpenMP-offload files of this workspace. A team can switch perflsp "
                    "off per repository with `enable = false` in `.perflsp.toml`.",
        json_schema_extra=_meta("resource"))
    gpus: list[str] = Field(
        default_factory=lambda: list(DEFAULT_GPUS),
        description="GPUs to classify each kernel on (ids, aliases or names from `perflsp gpus`). "
                    "Every kernel gets one roofline verdict per GPU. Default: the H100 SXM5 80GB.",
        json_schema_extra=_meta("resource", example=["h100", "rtx-3080"]))
    rules: dict[str, RuleLevel] = Field(
        default_factory=dict,
        description="Severity per rule code (`error`, `warning`, `information`, `hint`) or `off`, e.g. "
                    "`{\"roofline/bandwidth-bound\": \"hint\", \"precision/double-promotion\": \"off\"}`. "
                    "Roofline verdicts default to `information`; lints to their rule's default.",
        json_schema_extra=_meta("resource", example={"roofline/bandwidth-bound": "hint"}))
    include: list[str] = Field(
        default_factory=list,
        description="Glob patterns (relative to the workspace folder) of files to analyse; empty: every "
                    "C, C++ and CUDA source.",
        json_schema_extra=_meta("resource", example=["src/**/*.cu"]))
    exclude: list[str] = Field(
        default_factory=list,
        description="Glob patterns (relative to the workspace folder) of files never to analyse; wins "
                    "over `include`.",
        json_schema_extra=_meta("resource", example=["third_party/**"]))
    user_gpus: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Extra GPUs, as tables in the schema of the shipped GPU database (docs/gpus.md). A "
                    "GPU whose `id` matches a shipped one replaces it.",
        json_schema_extra=_meta("resource"))
    gpus_file: str | None = Field(
        None,
        description="A TOML file of extra GPUs (`[[gpu]]` tables, docs/gpus.md); relative paths are "
                    "resolved against the workspace folder.",
        json_schema_extra=_meta("resource", example="gpus.toml"))
    compile_flags: list[str] = Field(
        default_factory=list,
        description="Compiler flags of the project. `-D`/`-U` define macros for constant folding and "
                    "`-I` adds include folders; when `resourceUsage` is on they are passed (filtered "
                    "to safe flags) to nvcc.",
        json_schema_extra=_meta("resource", example=["-DBLOCK=256", "-Iinclude"]))
    nvcc_path: str | None = Field(
        None,
        description="The nvcc executable used for register/spill figures (`resourceUsage`). Runs a "
                    "program: honoured only from user settings or a trusted workspace.",
        json_schema_extra=_meta("machine-overridable", trusted=True))
    resource_usage: bool = Field(
        False,
        description="Compile saved files with nvcc in the background to read each kernel's registers "
                    "and shared memory from ptxas. Runs a program: honoured only from user settings or "
                    "a trusted workspace.",
        json_schema_extra=_meta("resource", trusted=True))
    compile: bool = Field(
        True,
        description="Compile each CUDA / OpenMP-offload file's device code in the background (after open, save "
                    "and a pause in typing) to count the instructions the GPU executes (nvcc, or clang with its "
                    "OpenMP offload runtime, and nvdisasm). Runs compilers: only in a trusted workspace. Without a "
                    "toolchain the source engine answers and says why.",
        json_schema_extra=_meta("resource", trusted=True))
    clang_path: str | None = Field(
        None,
        description="The clang (with the NVPTX OpenMP runtime beside it) used to compile OpenMP target regions "
                    "(`compile`). Runs a program: honoured only from user settings or a trusted workspace.",
        json_schema_extra=_meta("machine-overridable", trusted=True))
    compile_delay_ms: int = Field(
        1500, ge=0, le=60000,
        description="After an edit, wait this long for typing to pause before compiling again (`compile`).",
        json_schema_extra=_meta("window"))
    inlay_hints: bool = Field(
        True, description="Show occupancy and verdict inlay hints at launch sites.",
        json_schema_extra=_meta("resource"))
    code_lens: bool = Field(
        True, description="Show the roofline headline above each kernel (click for an explanation).",
        json_schema_extra=_meta("resource"))
    debounce_ms: int = Field(
        60, ge=0, le=5000,
        description="After a burst of edits (changes arriving while the previous analysis runs), wait "
                    "this long for typing to pause before analysing again. A lone edit is analysed at once.",
        json_schema_extra=_meta("window"))
    log_level: LogLevel = Field(
        "info",
        description="Least severe server log messages sent to the editor's output (`window/logMessage`); "
                    "stderr gets the same.",
        json_schema_extra=_meta("window"))
    trusted_workspace: bool = Field(
        False,
        description="Set by the editor when the user trusts the workspace (VS Code workspace trust). "
                    "Never read from `.perflsp.toml`.",
        json_schema_extra=_meta("application"))
    llm: LlmSettings = Field(
        default_factory=LlmSettings,
        description="The optional LLM advisor (`perflsp.llm.*`).",
        json_schema_extra=_meta("resource"))
    profiling: ProfilingSettings = Field(
        default_factory=ProfilingSettings,
        description="Nsight Compute profiling (`perflsp.profiling.*`).",
        json_schema_extra=_meta("resource"))

    @field_validator("rules", mode="before")
    @classmethod
    def _levels(cls, value: object) -> object:
        if isinstance(value, dict):
            return {k: _LEVEL_ALIASES.get(v.lower(), v.lower()) if isinstance(v, str) else v for k, v in value.items()}
        return value

    @field_validator("gpus")
    @classmethod
    def _some_gpu(cls, value: list[str]) -> list[str]:
        names = [v.strip() for v in value if v.strip()]
        if not names:
            raise ValueError("name at least one GPU (`perflsp gpus` lists them)")
        return names

    def rule_level(self, code: str, default: str) -> str:
        return self.rules.get(code, default)


# Documentation of the nested sections' fields (their models live in the llm/profiling layers).
# name -> (description, scope, trusted)
SECTION_FIELDS: dict[str, dict[str, tuple[str, Scope, bool]]] = {
    "llm": {
        "enabled": ("Ask an LLM to refine and explain verdicts. Sends kernel source to the endpoint: "
                    "from an untrusted workspace only a loopback endpoint is allowed.", "resource", True),
        "provider": ("Wire protocol: `openai` (any OpenAI-compatible server), `ollama` or `anthropic`.", "resource", False),
        "base_url": ("Endpoint URL; empty: the provider's default. A non-loopback URL is honoured only "
                     "from user settings or a trusted workspace.", "resource", True),
        "model": ("Model name as the endpoint knows it.", "resource", False),
        "api_key_env": ("Environment variable holding the API key (default OPENAI_API_KEY / "
                        "ANTHROPIC_API_KEY). Honoured only from user settings or a trusted workspace.", "machine-overridable", True),
        "stream": ("Stream explanations as they are generated.", "resource", False),
        "temperature": ("Sampling temperature.", "resource", False),
        "max_output_tokens": ("Upper bound on the answer's tokens.", "resource", False),
        "timeout_s": ("Seconds to wait for an answer.", "resource", False),
        "max_concurrent": ("Requests in flight at once.", "resource", False),
        "max_retries": ("Retries of a failed request.", "resource", False),
        "breaker_threshold": ("Consecutive failures before the advisor pauses.", "resource", False),
        "breaker_cooldown_s": ("Seconds the advisor pauses after repeated failures.", "resource", False),
        "few_shot": ("Add worked examples to the prompt.", "resource", False),
        "max_prompt_tokens": ("Token budget of a prompt.", "resource", False),
        "cache_enabled": ("Cache answers per kernel text, GPU and prompt version.", "resource", False),
        "cache_max_mb": ("Size cap of the answer cache.", "machine", False),
        "use_env_proxy": ("Honour HTTP(S)_PROXY from the environment.", "machine", False),
    },
    "profiling": {
        "enabled": ("Allow profiling kernels with Nsight Compute. Runs programs: honoured only from user "
                    "settings or a trusted workspace.", "resource", True),
        "build_command": ("argv template that builds the program (`{file}`, `{exe}`, `{args}`).", "resource", True),
        "run_command": ("argv template that runs it (`{exe}`, `{args}`, `{kernel}`, `{block}`).", "resource", True),
        "args": ("The program's arguments: what `{args}` becomes, and the `argv` the static analysis folds "
                 "where `main` parses it (loop bounds, sizes), as `perflsp check --args` does. Unset: unknown.",
                 "resource", True),
        "launcher": ("Prefix such as `srun -p gpu --gres=gpu:1` or `ssh host`.", "resource", True),
        "ncu_path": ("The `ncu` executable.", "machine-overridable", True),
        "ncu_args": ("Extra ncu arguments.", "resource", True),
        "env": ("Extra environment for build and run.", "resource", True),
        "block_env_var": ("Environment variable carrying a block-size override.", "resource", True),
        "clock_control": ("ncu clock control: `base` (default), `none`, `reset`.", "resource", False),
        "kernel_filter": ("Regex on kernel names to profile.", "resource", False),
        "launch_count": ("Launches to profile per kernel.", "resource", False),
        "launch_skip": ("Launches to skip before profiling.", "resource", False),
        "build_timeout_s": ("Build timeout in seconds.", "resource", False),
        "run_timeout_s": ("Run timeout in seconds.", "resource", False),
        "output_cap_bytes": ("Cap on captured program output.", "resource", False),
    },
}
SECTION_MODELS: dict[str, type[BaseModel]] = {"llm": LlmSettings, "profiling": ProfilingSettings}


def trusted_fields() -> set[str]:
    """Dotted snake_case paths (`nvcc_path`, `llm.base_url`, ...) of trusted-only settings."""
    out = {name for name, info in Settings.model_fields.items()
           if (info.json_schema_extra or {}).get("trusted") and name not in SECTION_MODELS}  # type: ignore[union-attr]
    for section, fields in SECTION_FIELDS.items():
        out.update(f"{section}.{name}" for name, (_, _, trusted) in fields.items() if trusted)
    out.update(f"profiling.{name}" for name in PROFILING_PRIVILEGED)
    return out


def wire_key(path: str) -> str:
    """`llm.base_url` -> `perflsp.llm.baseUrl`."""
    return "perflsp." + ".".join(to_camel(part) for part in path.split("."))


# --------------------------------------------------------------------------- generation


class SettingRow(TypedDict):
    """One setting as the generated schema and docs show it."""

    key: str  # on the wire: `perflsp.llm.baseUrl`
    schema: JsonSchemaValue
    description: str
    scope: str
    trusted: bool
    example: NotRequired[JsonValue]


def _field_schema(info: FieldInfo) -> JsonSchemaValue:
    """The JSON schema of one field, with its default."""
    assert info.annotation is not None  # (every field of the settings models is annotated)
    adapted = TypeAdapter(info.annotation).json_schema()
    schema = _inline_refs(adapted, adapted.pop("$defs", {}))
    assert isinstance(schema, dict)  # (an object schema stays one)
    schema.pop("title", None)
    if "anyOf" in schema and len(schema["anyOf"]) == 2 and {"type": "null"} in schema["anyOf"]:
        other = next(s for s in schema["anyOf"] if s != {"type": "null"})
        schema = {**{k: v for k, v in schema.items() if k != "anyOf"}, **other}
        schema["type"] = [other.get("type", "string"), "null"] if "type" in other else other.get("type")
    schema["default"] = _default(info)
    return schema


def _with_rule_codes(schema: JsonSchemaValue) -> JsonSchemaValue:
    """The `rules` object's keys, from the rule registry: one documented property per code, and
    no other key (an editor then flags a misspelt code as it is typed)."""
    levels = schema["additionalProperties"]
    properties = {code: {**levels, "markdownDescription": f"{info.summary} (default `{info.default_severity}`; "
                                                          f"[documentation]({rule_doc_url(code)}))"}
                  for code, info in RULES.items()}
    return {**schema, "properties": properties, "propertyNames": {"enum": list(RULES)}}


def _inline_refs(schema: object, defs: dict[str, JsonSchemaValue]) -> object:
    """`schema` with each `$ref` replaced by its definition (VS Code's settings read no `$defs`)."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _inline_refs(defs[schema["$ref"].split("/")[-1]], defs)
        return {k: _inline_refs(v, defs) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_inline_refs(v, defs) for v in schema]
    return schema


def _default(info: FieldInfo) -> object:
    value = info.get_default(call_default_factory=True)
    return value.model_dump() if isinstance(value, BaseModel) else value


def setting_rows() -> list[SettingRow]:
    """Every setting, flattened: key, schema, description, scope, trusted."""
    rows: list[SettingRow] = []
    for name, info in Settings.model_fields.items():
        if name in SECTION_MODELS:
            model = SECTION_MODELS[name]
            docs = SECTION_FIELDS[name]
            for sub, sub_info in model.model_fields.items():
                description, scope, trusted = docs.get(sub, ("", "resource", False))
                rows.append({"key": wire_key(f"{name}.{sub}"), "schema": _field_schema(sub_info),
                             "description": description, "scope": scope,
                             "trusted": trusted or (name == "profiling" and sub in PROFILING_PRIVILEGED)})
            continue
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        schema = _field_schema(info)
        if name == "rules":
            schema = _with_rule_codes(schema)
        rows.append({"key": wire_key(name), "schema": schema,
                     "description": info.description or "", "scope": str(extra["scope"]),
                     "trusted": extra.get("trusted") is True, "example": extra.get("example")})
    return rows


def vscode_configuration() -> JsonSchemaValue:
    """`contributes.configuration` for the VS Code extension's package.json."""
    properties: dict[str, JsonSchemaValue] = {}
    for row in setting_rows():
        prop = dict(row["schema"])
        description = row["description"]
        if row["trusted"]:
            description += " (Trusted workspaces or user settings only.)"
        prop["markdownDescription"] = description
        prop["scope"] = row["scope"]
        properties[row["key"]] = prop
    return {"title": "perflsp", "properties": properties}


def settings_markdown() -> str:
    """docs/settings.md."""
    lines = [
        "# Settings",
        "",
        "<!-- Generated by `python -m perflsp.server.settings --docs`; do not edit by hand. -->",
        "",
        "Settings come, lowest precedence first, from the defaults, the client's `initializationOptions`",
        "(user-level), `workspace/configuration` (the editor's user + workspace settings) and the",
        "workspace folder's `.perflsp.toml`. In `.perflsp.toml` write keys without the `perflsp.` prefix,",
        "in camelCase or snake_case; sections are tables (`[llm]`, `[profiling]`, `[rules]`), and user GPUs",
        "may be given as `[[gpu]]` tables. Settings marked **trusted** send code off the machine or run a",
        "program: they are honoured only from user-level settings or when the editor says the workspace is",
        "trusted (`perflsp.trustedWorkspace`, or `workspaceTrusted` in `initializationOptions`); a cloned",
        "repository's `.perflsp.toml` alone can never set them. Invalid settings are reported once, naming",
        "the file and field, and the last valid configuration stays in effect.",
        "",
        "| Setting | Type | Default | Scope | Description |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in setting_rows():
        schema = row["schema"]
        trusted = " **trusted**" if row["trusted"] else ""
        description = row["description"].replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{row['key']}` | {_type_text(schema)} | `{json.dumps(schema['default'])}` | "
                     f"{row['scope']}{trusted} | {description} |")
    lines += [
        "",
        "## Example `.perflsp.toml`",
        "",
        "```toml",
        "enable = true",
        'gpus = ["h100", "rtx-3080"]',
        'exclude = ["third_party/**"]',
        'compileFlags = ["-DBLOCK=256"]',
        "",
        "[rules]",
        '"roofline/bandwidth-bound" = "hint"',
        "",
        "[[gpu]]  # a user GPU, same schema as docs/gpus.md",
        "# id = \"my-card\" ...",
        "```",
        "",
    ]
    return "\n".join(lines)


def _type_text(schema: JsonSchemaValue) -> str:
    kind = schema.get("type")
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind == "array":
        return f"array of {schema.get('items', {}).get('type', 'object')}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict) and "enum" in schema["additionalProperties"]:
        return "object (code → level)"
    return str(kind or "any")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--vscode-schema"]:
        sys.stdout.write(json.dumps(vscode_configuration(), indent=2) + "\n")
        return 0
    if args == ["--docs"]:
        sys.stdout.write(settings_markdown())
        return 0
    sys.stderr.write("usage: python -m perflsp.server.settings --vscode-schema | --docs\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
