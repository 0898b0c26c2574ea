"""The configuration reference, rendered from the code that reads the configuration.

``docs/configuration.md`` and ``docs/zh-CN/configuration.md`` are written by ``make docs``
(``docs/generate.py``) from three sources, so a page cannot say what the code does not do:

- the language-server settings: ``settings._FIELDS`` gives each camelCase key and its parser (the
  parser's closure holds the range or the choices), ``Settings()`` the default;
- the environment variables fimble reads, in ``ENVIRONMENT`` below (defaults taken from code where
  code has one);
- the command-line options: the click commands' own parameters (type, default, help, envvar).

The effect of each, in English and Chinese, lives here. A setting, variable or option without text
makes ``render`` raise, so a new one cannot ship undocumented: ``tests/test_docs.py`` fails until its
text is added and ``make docs`` is run. Only the generator and that test import this module.
Its length is that text, in two languages; the code that renders it is short.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import click

from fimble.server import settings as _settings

__all__ = ["ENVIRONMENT", "INTERNAL_ENVIRONMENT", "LANGUAGES", "SETTING_EFFECTS", "render"]

LANGUAGES = ("en", "zh-CN")
Text = Mapping[str, str]  # language -> text


def _t(en: str, zh: str) -> dict[str, str]:
    return {"en": en, "zh-CN": zh}


def _sep(lang: str) -> str:
    return "、" if lang == "zh-CN" else ", "


# -- language-server settings: camelCase key -> effect ---------------------------------------------

SETTING_EFFECTS: dict[str, Text] = {
    "enable": _t(
        "automatic suggestions on/off (also `fimble.toggle`); explicit invocation always works",
        "自动建议开关（也可用 `fimble.toggle`）；主动触发始终有效",
    ),
    "model": _t(
        "model name or `.gguf` path; changing it reloads the model for the whole process "
        "(see [Changing the model or threads](#changing-the-model-or-threads))",
        "模型名或 `.gguf` 路径；修改后整个进程重新加载模型（见[修改模型或线程数](#修改模型或线程数)）",
    ),
    "threads": _t(
        "llama.cpp threads, 0 = physical cores (SMT siblings only add contention); changing it reloads "
        "the model too",
        "llama.cpp 线程数，0 = 物理核数（超线程只会增加争用）；修改后同样会重新加载模型",
    ),
    "maxTokens": _t("longest suggestion", "建议的最大长度"),
    "multiline": _t(
        "`auto` (decided from the syntax at the cursor), `always` (a block everywhere; the stop rules "
        "still apply) or `never` (one line); see [One line or a block](how-it-works.md#one-line-or-a-block)",
        "`auto`（由光标处的语法决定）、`always`（处处整块；停止规则仍然适用）或 `never`（单行）；"
        "见[单行还是整块](how-it-works.md#单行还是整块)",
    ),
    "debounceMs": _t(
        "server-side wait before an automatic request (0 when the client debounces)",
        "自动请求前服务器端的等待（客户端自己防抖时为 0）",
    ),
    "deadlineMs": _t(
        "a request past its deadline returns the whole lines it has; one whose prompt is still being "
        "read waits on for it (up to `invokedDeadlineMs`), since giving up would show nothing",
        "超过期限的请求返回已有的完整行；提示仍在读入的请求继续等它（最多到 `invokedDeadlineMs`），"
        "因为放弃就什么也显示不了",
    ),
    "invokedDeadlineMs": _t(
        'an invoked request (the user asked: VS Code\'s "Trigger Inline Suggestion", a key in Neovim) is '
        "answered from the full prompt, repository context included, however cold the place, and waits "
        "up to this long (never less than `deadlineMs`; a cold full prompt of ~1,100 tokens takes 9 s at "
        "120 prompt tokens/s, 25 s at 45); past it, it shows the first prompt's answer at that place if "
        "an automatic request got one, and the full prompt reads on. Automatic requests take a first "
        "prompt where the cache is cold (`firstPromptTokens`) and wait for it to be read up to this long",
        "主动触发的请求（用户要求的：VS Code 的 “Trigger Inline Suggestion”、Neovim 里的按键）无论位置多冷"
        "都用完整提示（含仓库上下文）作答，最多等这么久（不少于 `deadlineMs`；约 1,100 token 的冷完整提示在"
        "每秒 120 个提示 token 时需 9 s，每秒 45 个时需 25 s）；超过期限时，若自动请求在该处已得到首个提示的"
        "答案，就显示它，完整提示继续读入。自动请求在缓存冷的地方用首个提示（`firstPromptTokens`），并最多等"
        "这么久让它读完",
    ),
    "prefixTokens": _t("budget for the file before the cursor", "光标之前文件内容的 token 预算"),
    "suffixTokens": _t(
        "budget for the file after the cursor (evaluated again on every keystroke)",
        "光标之后文件内容的 token 预算（每次按键都会重新计算）",
    ),
    "contextTokens": _t(
        "budget for other files' snippets ([repository context](repository-context.md))",
        "其他文件片段（[仓库上下文](repository-context.md)）的 token 预算",
    ),
    "languages": _t(
        'per-language switch by languageId, `"*"` for the rest, e.g. `{"markdown": false, "*": true}`; '
        "empty: all on",
        '按 languageId 开关，`"*"` 表示其余语言，例如 `{"markdown": false, "*": true}`；为空时全部开启',
    ),
    "index.exclude": _t(
        'extra glob patterns the workspace index skips, e.g. `["**/vendor/**"]`',
        '工作区索引额外跳过的 glob 模式，例如 `["**/vendor/**"]`',
    ),
    "completionFallback": _t(
        "offer the completion item: `auto` (when the client lacks inline completion), `always`, `never`",
        "提供补全项回退：`auto`（客户端不支持行内补全时）、`always`、`never`",
    ),
    "acceptanceLog": _t(
        "write shown/accepted events to `$FIMBLE_HOME/acceptance.jsonl` (sizes and timings, no code)",
        "把显示/接受事件写入 `$FIMBLE_HOME/acceptance.jsonl`（只有大小和时间，没有代码）",
    ),
    "firstSuggestionMs": _t(
        "latency target where the KV cache is cold: a smaller first prompt (never under "
        "`firstPromptTokens`), the full one warmed up while idle; past it, an automatic request shows "
        "the finished lines of a block (or of a statement left open) and the rest is written on for "
        "the next keystroke; `0` always uses the full prompt and waits for whole blocks",
        "KV 缓存为冷时的延迟目标：先用较小的首个提示（不少于 `firstPromptTokens`），完整提示在空闲时预热；"
        "超过它后，自动请求先显示代码块（或未结束的语句）中已完成的行，其余部分继续生成，留给下一次按键；"
        "`0` 表示始终使用完整提示，并等待整个代码块",
    ),
    "firstPromptTokens": _t(
        "the least a cold place's first prompt reads: the local window around the cursor (the lines "
        "below it, up to a third of this, then the lines above; repository context only in what is "
        "left) in this many tokens, or more where the "
        "measured speed reads more within `firstSuggestionMs`; smaller answers sooner and worse (see "
        "[the first prompt](quality.md#the-first-prompt-at-a-cold-place))",
        "冷位置首个提示至少读入的 token 数：光标周围的局部窗口（先是光标下方的行，"
        "至多占三分之一，再是上方的行；仓库上下文只用剩下的空间），共这么多 token；"
        "若实测速度在 `firstSuggestionMs` 内能读更多，则更多；更小则更快但更差（见"
        "[冷位置的首个提示](quality.md#冷位置的首个提示)）",
    ),
    "kvStateMb": _t(
        "size bound of the KV states saved on disk (MiB); `0` keeps none",
        "磁盘上保存的 KV 状态的大小上限（MiB）；`0` 表示不保存",
    ),
    "speculative": _t(
        "prompt-lookup speculative decoding (drafts checked in batches); `false` decodes one token per step",
        "基于提示查找的推测解码（草稿分批校验）；`false` 表示每步解码一个 token",
    ),
}

# Defaults that are not a plain value in ``Settings``.
_SETTING_DEFAULTS: dict[str, Text] = {
    "model": _t(
        "the model `fimble serve` loaded (`--model`, `FIMBLE_MODEL`, else `{default_model}`)",
        "`fimble serve` 加载的模型（`--model`、`FIMBLE_MODEL`，否则为 `{default_model}`）",
    ),
}


# -- environment variables ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EnvVar:
    name: str
    default: Text
    effect: Text


def _cache_defaults() -> tuple[int, int]:
    from fimble.completion.cache import CacheConfig

    config = CacheConfig()
    return config.disk_mb, config.disk_entries


def _cpu_paths(lang: str) -> str:
    from fimble.models.cpu_path import CpuPath

    return _sep(lang).join(f"`{p.value}`" for p in CpuPath)


def _default_model() -> str:
    from fimble.models.registry import load_registry

    return load_registry().default  # the bundled registry, whatever FIMBLE_REGISTRY says here


def _environment() -> tuple[EnvVar, ...]:
    cache_mb, cache_entries = _cache_defaults()
    return (
        EnvVar(
            "FIMBLE_HOME",
            _t(
                "the user cache dir (`~/.cache/fimble` on Linux)",
                "用户缓存目录（Linux 上为 `~/.cache/fimble`）",
            ),
            _t("where models, indexes, caches and logs live", "模型、索引、缓存和日志存放的位置"),
        ),
        EnvVar(
            "FIMBLE_REGISTRY",
            _t("the bundled `registry.toml`", "内置的 `registry.toml`"),
            _t("a replacement model registry (private mirror)", "替代的模型注册表（私有镜像）"),
        ),
        EnvVar(
            "FIMBLE_MODEL",
            _t(f"`{_default_model()}`", f"`{_default_model()}`"),
            _t(
                "model name or `.gguf` path for `fimble serve` (same as `--model`)",
                "`fimble serve` 使用的模型名或 `.gguf` 路径（同 `--model`）",
            ),
        ),
        EnvVar(
            "FIMBLE_API_KEY",
            _t("none", "无"),
            _t(
                "bearer key HTTP clients must send (same as `--api-key`; compared in constant time)",
                "HTTP 客户端必须发送的 bearer 密钥（同 `--api-key`；以常数时间比较）",
            ),
        ),
        EnvVar(
            "FIMBLE_BACKEND_API_KEY",
            _t("none", "无"),
            _t(
                "key for a remote backend (same as `--backend-api-key`)",
                "远程后端的密钥（同 `--backend-api-key`）",
            ),
        ),
        EnvVar(
            "FIMBLE_COMPLETION_CACHE_MB",
            _t(f"`{cache_mb}`", f"`{cache_mb}`"),
            _t(
                "size of the on-disk completion cache (an LMDB map that never grows past it; at 80 % full, "
                "the oldest quarter is dropped); `0` keeps the cache in memory only",
                "磁盘上补全缓存的大小（一个永远不会超过该大小的 LMDB 映射；用到 80% 时丢弃最旧的四分之一）；"
                "`0` 表示缓存只保存在内存中",
            ),
        ),
        EnvVar(
            "FIMBLE_COMPLETION_CACHE_ENTRIES",
            _t(f"`{cache_entries}`", f"`{cache_entries}`"),
            _t(
                "completions kept on disk; the least recently used go first",
                "磁盘上保留的补全条数；最久未使用的最先淘汰",
            ),
        ),
        EnvVar(
            "FIMBLE_KV_STATE_DIR",
            _t("`$FIMBLE_HOME/kvstate`", "`$FIMBLE_HOME/kvstate`"),
            _t("where saved KV states live", "保存的 KV 状态存放的位置"),
        ),
        EnvVar(
            "FIMBLE_CPU_PATH_DIR",
            _t("`$FIMBLE_HOME/cpu-path`", "`$FIMBLE_HOME/cpu-path`"),
            _t("where the CPU-path probe's verdicts live", "CPU 路径探测结论存放的位置"),
        ),
        EnvVar(
            "FIMBLE_CPU_PATH",
            _t("probed", "探测决定"),
            _t(
                f"force a CPU path ({_cpu_paths('en')}) without probing; a bad value is an error naming the "
                "choices (see [The CPU it lands on](how-it-works.md#the-cpu-it-lands-on))",
                f"不探测、直接指定 CPU 路径（{_cpu_paths('zh-CN')}）；取值不对时报错并列出可选值"
                "（见[落到哪颗 CPU 上](how-it-works.md#落到哪颗-cpu-上)）",
            ),
        ),
    )


ENVIRONMENT: tuple[EnvVar, ...] = _environment()
# Read by fimble's code for its own tests; documented in one line, not in the table.
INTERNAL_ENVIRONMENT = frozenset({"FIMBLE_PROBE_CRASH"})


# -- command-line options: (command, parameter name) -> Chinese help; English is click's help ---------

_OPTION_ZH: dict[tuple[str, str], str] = {
    ("fimble", "version"): "显示版本并退出。",
    ("fimble", "verbose"): "在 stderr 上输出更多日志（-vv 输出调试日志）。",
    ("fimble serve", "stdio"): "在 stdin/stdout 上使用 LSP（默认）。",
    ("fimble serve", "tcp"): "改为在 TCP 套接字上使用 LSP（例如 127.0.0.1:2087）。",
    ("fimble serve", "http"): "同时在同一进程中提供 HTTP API。",
    ("fimble serve", "api_key"): "HTTP 客户端必须发送的密钥。",
    ("fimble serve", "allow_remote"): "允许 --http/--tcp 绑定其他机器能访问的地址（HTTP 还需要 --api-key）。",
    ("fimble serve", "no_lsp"): "只提供 HTTP（配合 --http），例如作为后台服务。",
    ("fimble serve", "backend"): "在哪里生成：本进程，或一个 OpenAI 兼容的服务器（--backend-url）。",
    (
        "fimble serve",
        "backend_url",
    ): "配合 --backend openai：例如 http://gpu-box:8080（llama-server、vLLM）。",
    ("fimble serve", "backend_api_key"): "后端服务器的密钥。",
    ("fimble serve", "model"): "`fimble models list` 中的模型名，或 .gguf 路径（环境变量 FIMBLE_MODEL）。",
    ("fimble serve", "threads"): "CPU 线程数（0：物理核数）。",
    (
        "fimble serve",
        "self_test",
    ): "配合 --tcp：开始监听后，通过套接字在 LINE:COL 处补全 PATH，并打印到 stderr。",
    ("fimble complete", "model"): "`fimble models list` 中的模型名，或 .gguf 路径。",
    ("fimble complete", "max_tokens"): "建议的最大长度。",
    ("fimble complete", "multiline"): "强制建议的形态（默认：由光标决定）。",
    ("fimble complete", "threads"): "CPU 线程数（0：物理核数）。",
    ("fimble complete", "context"): "从工作区的索引（由 `fimble index` 建立）加入仓库上下文。",
    ("fimble complete", "as_json"): "以 JSON 打印结果和耗时。",
}
# Options click gives no help for, in both languages.
_OPTION_EN: dict[tuple[str, str], str] = {
    ("fimble complete", "max_tokens"): "Longest suggestion.",
}
_OPTION_DEFAULTS: dict[tuple[str, str], Text] = {
    ("fimble complete", "multiline"): _t("decided from the cursor", "由光标决定"),
    ("fimble serve", "model"): _t("`{default_model}`", "`{default_model}`"),
    ("fimble complete", "model"): _t("`{default_model}`", "`{default_model}`"),
}
# Commands rendered, one table each; commands in one tuple must take the same options.
_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("fimble",),
    ("fimble serve",),
    ("fimble complete", "fimble explain"),
)


def _command(name: str) -> click.Command:
    from fimble.cli import cli

    command: click.Command = cli
    for part in name.split()[1:]:
        assert isinstance(command, click.Group)
        found = command.commands.get(part)
        if found is None:
            raise LookupError(f"no command {name!r}")
        command = found
    return command


# -- rendering ----------------------------------------------------------------------------------------

_WORDS: dict[str, Text] = {
    "title": _t("Configuration", "配置"),
    "generated": _t(
        "Generated by `make docs` from `fimble/server/settings.py`, the click commands and "
        "`fimble/server/settings_doc.py`: edit those, not this page. "
        "中文：[zh-CN/configuration.md](zh-CN/configuration.md)。",
        "由 `make docs` 根据 `fimble/server/settings.py`、click 命令和 `fimble/server/settings_doc.py` 生成："
        "请修改这些文件，不要修改本页。English: [../configuration.md](../configuration.md)。",
    ),
    "lsp": _t("Language-server settings", "语言服务器设置"),
    "lsp_intro": _t(
        "Sent as `initializationOptions` or `workspace/didChangeConfiguration` (or answered to "
        '`workspace/configuration`), camelCase, bare or under `"fimble"`. Each field is validated on its '
        "own: a bad value gives one `window/showMessage` naming the setting, the field keeps its previous "
        "value, and the rest applies. Editors send the same keys: VS Code as `fimble.*` settings "
        "([VS Code](editors/vscode.md#settings)), Neovim under `settings` "
        "([Neovim](editors/neovim.md#options)). Settings are per connection: what one editor sends "
        "applies to its own requests only, when several share one server. `model`, `threads` and "
        "`kvStateMb` are the exceptions: one model and one store of saved KV states serve the whole "
        "process, so an editor that sets them sets them for all.",
        "通过 `initializationOptions` 或 `workspace/didChangeConfiguration` 发送（或作为 "
        '`workspace/configuration` 的回答），camelCase，直接给出或放在 `"fimble"` 下。每个字段单独校验：'
        "错误的值会触发一条指出该设置的 `window/showMessage`，该字段保持原值，其余设置照常生效。编辑器发送"
        "同样的键：VS Code 作为 `fimble.*` 设置（[VS Code](e"
        "ditors/vscode.md#设置)），Neovim 放在 `settings` 下"
        "（[Neovim](editors/neovim.md#选项)）。设置按连接生效：多个编辑器共用一个服务器时，一个编辑器发送的设置"
        "只作用于它自己的请求。`model`、`threads` 和 `kvStateMb` 例外：整个进程只有一个模型和一个已保存 KV "
        "状态的存储，因此一个编辑器设置它们即对所有编辑器生效。",
    ),
    "example": _t("Every key with its default:", "所有键及其默认值："),
    "key": _t("key", "键"),
    "type": _t("type", "类型"),
    "default": _t("default", "默认值"),
    "effect": _t("effect", "作用"),
    "switch": _t("Changing the model or threads", "修改模型或线程数"),
    "switch_text": _t(
        "Changing `model` or `threads` stops the loaded model first (its running suggestion, warm-up and "
        "prefetch are cancelled, its queued KV states are written) and loads the new one once the old one "
        "is freed: only one model is ever in memory, and only one KV state store works on a model's state "
        "directory. Suggestions are empty while the new model loads, as at start-up, and the progress bar "
        '("loading model …") shows it. (Before, the two overlapped, and a switch could crash the server: '
        "each load replaced llama.cpp's log callback while the old model, freeing itself on another thread, "
        "still logged through the previous one. A stress run of that pattern, "
        "`tests/completion/test_engine_model.py::"
        "test_a_new_engine_does_not_pull_the_log_callback_from_under_another_thread`, crashed in 3 of 4 runs "
        "before the fix and in none after.)",
        "修改 `model` 或 `threads` 时，会先停下已加载的模型（"
        "取消它正在生成的建议、预热和预取，写出它排队中的 KV "
        "状态），待旧模型释放后再加载新模型：内存中始终只有一个"
        "模型，一个模型的状态目录上也始终只有一个 KV 状态存储"
        "在工作。新模型加载期间建议为空（与启动时一样），进度条"
        '（"loading model …"）会显示这一点。（此前两者会重叠，'
        "切换模型可能让服务器崩溃：每次加载都会替换 llama.cpp"
        " 的日志回调，而旧模型正在另一个线程上释放自身，仍通过"
        "之前的回调写日志。对这一模式的压力测试 `tests/completion/test_engine_model.py::"
        "test_a_new_engine_does_not_pull_the_log_callback_from"
        "_under_another_thread`，在修复前 4 次运行中崩溃 3 次，"
        "修复后一次也没有。）",
    ),
    "env": _t("Environment variables", "环境变量"),
    "variable": _t("variable", "变量"),
    "env_internal": _t(
        "Also read, for fimble's own tests only: {names}.",
        "另有仅供 fimble 自身测试使用的：{names}。",
    ),
    "cli": _t("Command-line options", "命令行选项"),
    "cli_intro": _t(
        "Every command has `--help`; the [commands table](../README.md#commands) says what each does. "
        "The options of the server, of one completion and of every command:",
        "每个命令都有 `--help`；[命令表](../../README.zh-CN.md#命令"
        ")说明了每个命令的作用。服务器、单次补全以及所有命令的选项：",
    ),
    "option": _t("option", "选项"),
    "environment": _t("environment", "环境变量"),
    "same_options": _t("`{a}` takes the same options.", "`{a}` 接受同样的选项。"),
    "group_intro": _t(
        "Before the command name, e.g. `fimble -vv serve`.", "写在命令名之前，例如 `fimble -vv serve`。"
    ),
    "boolean": _t("boolean", "布尔值"),
    "integer": _t("integer, {lo}–{hi}", "整数，{lo}–{hi}"),
    "choice": _t("one of {options}", "{options} 之一"),
    "model_type": _t("string or null", "字符串或 null"),
    "languages_type": _t("object: languageId → boolean", "对象：languageId → 布尔值"),
    "globs_type": _t("list of strings", "字符串列表"),
    "flag": _t("flag", "开关"),
    "flag_pair": _t("flag pair", "成对开关"),
    "text": _t("text", "文本"),
    "whole": _t("integer", "整数"),
    "count": _t("count (`-v`, `-vv`)", "计数（`-v`、`-vv`）"),
    "none": _t("none", "无"),
    "off": _t("off", "关"),
    "on": _t("on", "开"),
}


def _word(key: str, lang: str, **values: str) -> str:
    return _WORDS[key][lang].format(**values)


def _closure(parse: Callable[..., Any]) -> dict[str, Any]:
    cells = parse.__closure__ or ()
    return dict(zip(parse.__code__.co_freevars, (c.cell_contents for c in cells), strict=True))


def _parser_type(parse: Callable[..., Any], lang: str) -> str:
    """What a ``_FIELDS`` parser accepts, read from the parser itself (its range or choices)."""
    simple = {
        _settings._bool: "boolean",
        _settings._model: "model_type",
        _settings._languages: "languages_type",
        _settings._globs: "globs_type",
    }
    if parse in simple:
        return _word(simple[parse], lang)
    maker = parse.__qualname__.split(".<locals>", 1)[0]
    cells = _closure(parse)
    if maker == "_int_range":
        return _word("integer", lang, lo=str(cells["lo"]), hi=str(cells["hi"]))
    if maker == "_choice":
        return _word("choice", lang, options=_sep(lang).join(f"`{o}`" for o in cells["options"]))
    raise LookupError(
        f"no description of the parser {parse.__qualname__}: add one to {__name__}._parser_type"
    )


def _value(value: object) -> str:
    if isinstance(value, str):
        return f"`{value}`"
    return f"`{json.dumps(value)}`"


def _setting_rows(lang: str) -> Iterator[str]:
    defaults = _settings.Settings()
    for path, (attr, parse) in _settings._FIELDS.items():
        key = ".".join(path)
        if key not in SETTING_EFFECTS:
            raise LookupError(f"setting {key!r} has no effect text: add it to {__name__}.SETTING_EFFECTS")
        if key in _SETTING_DEFAULTS:
            default = _SETTING_DEFAULTS[key][lang].format(default_model=_default_model())
        else:
            value = getattr(defaults, attr)
            if isinstance(value, tuple) and not value:
                value = {} if key == "languages" else []
            default = _value(value)
        yield f"| `{key}` | {_parser_type(parse, lang)} | {default} | {SETTING_EFFECTS[key][lang]} |"


def _example() -> str:
    defaults = _settings.Settings()
    out: dict[str, Any] = {}
    for path, (attr, _parse) in _settings._FIELDS.items():
        value = getattr(defaults, attr)
        if isinstance(value, tuple) and not value:
            value = {} if path == ("languages",) else []
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return json.dumps({"fimble": out}, indent=2, ensure_ascii=False)


def _option_type(param: click.Option, lang: str) -> str:
    if param.is_flag and param.secondary_opts:
        return _word("flag_pair", lang)
    if param.is_flag:
        return _word("flag", lang)
    kind = param.type
    if param.count:
        return _word("count", lang)
    if isinstance(kind, click.IntRange):
        return _word("integer", lang, lo=str(kind.min), hi=str(kind.max))
    if isinstance(kind, click.Choice):
        return _word("choice", lang, options=_sep(lang).join(f"`{c}`" for c in kind.choices))
    if param.metavar:
        return f"`{param.metavar}`"
    if kind is click.INT:
        return _word("whole", lang)
    return _word("text", lang)


def _option_default(command: str, param: click.Option, lang: str) -> str:
    if (command, param.name or "") in _OPTION_DEFAULTS:
        return _OPTION_DEFAULTS[(command, param.name or "")][lang].format(default_model=_default_model())
    default = param.default  # click 8.2+ marks "no default" with a sentinel of its own
    if param.is_flag and not param.secondary_opts:
        return _word("on" if default is True else "off", lang)
    if isinstance(default, bool):
        flags = param.opts if default else param.secondary_opts
        return f"`{flags[0]}`"
    if not isinstance(default, int | float | str):
        return _word("none", lang)
    return _value(default)


def _option_rows(command: str, lang: str) -> Iterator[str]:
    for param in _command(command).params:
        if not isinstance(param, click.Option):
            continue
        key = (command, param.name or "")
        help_en = param.help or _OPTION_EN.get(key)
        if not help_en:
            raise LookupError(
                f"`{command}` option {param.opts[0]} has no help: add it to click or {__name__}"
            )
        if lang == "en":
            effect = help_en
        elif key in _OPTION_ZH:
            effect = _OPTION_ZH[key]
        else:
            raise LookupError(f"`{command}` option {param.opts[0]} has no Chinese text: add it to {__name__}")
        flags = " / ".join(f"`{o}`" for o in (*param.opts, *param.secondary_opts))
        envvar = f"`{param.envvar}`" if isinstance(param.envvar, str) else ""
        yield (
            f"| {flags} | {_option_type(param, lang)} | {_option_default(command, param, lang)} | "
            f"{envvar} | {effect} |"
        )


def _signature(command: click.Command) -> list[tuple[str, ...]]:
    return [tuple(p.opts) for p in command.params]


def render(lang: str) -> str:
    """The configuration page in ``lang`` (one of ``LANGUAGES``)."""

    def w(key: str, **values: str) -> str:
        return _word(key, lang, **values)

    lines = [
        f"# {w('title')}",
        "",
        f"*{w('generated')}*",
        "",
        f"## {w('lsp')}",
        "",
        w("lsp_intro"),
        "",
        f"| {w('key')} | {w('type')} | {w('default')} | {w('effect')} |",
        "|---|---|---|---|",
        *_setting_rows(lang),
        "",
        w("example"),
        "",
        "```json",
        _example(),
        "```",
        "",
        f"### {w('switch')}",
        "",
        w("switch_text"),
        "",
        f"## {w('env')}",
        "",
        f"| {w('variable')} | {w('default')} | {w('effect')} |",
        "|---|---|---|",
        *(f"| `{v.name}` | {v.default[lang]} | {v.effect[lang]} |" for v in ENVIRONMENT),
        "",
        w("env_internal", names=_sep(lang).join(f"`{n}`" for n in sorted(INTERNAL_ENVIRONMENT))),
        "",
        f"## {w('cli')}",
        "",
        w("cli_intro"),
    ]
    for group in _COMMANDS:
        first, *others = group
        for other in others:
            if _signature(_command(other)) != _signature(_command(first)):
                raise LookupError(f"`{other}` no longer takes the options of `{first}`: list it on its own")
        lines += ["", f"### `{first}`", ""]
        if first == "fimble":
            lines += [w("group_intro"), ""]
        lines += [
            f"| {w('option')} | {w('type')} | {w('default')} | {w('environment')} | {w('effect')} |",
            "|---|---|---|---|---|",
            *_option_rows(first, lang),
        ]
        for other in others:
            lines += ["", w("same_options", a=other)]
    return "\n".join(lines) + "\n"
