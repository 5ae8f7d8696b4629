"""A traceback cut before its exception line, judged by its innermost frames (issue 17, batches 9-11).

An excerpt that stops inside a traceback (a paste cut at a search result's boundary, a job killed while printing
it) shows where the program was when it raised, not what it raised. Most such frames say nothing about the cause (a
trainer's `train()`, a model's `forward`): the log then stays a crash. A few places in a training stack fail for one
reason only, and there the innermost frames name the family. Each rule looks at the innermost frames alone (the last
RULE_DEPTH frames; the outer ones, `main()` -> `train()`, are common to every failure), and each was measured on the
cut logs of batches 9-11 and on every log of batches 1-11 (tests/logs/test_issue17_judge11a.py):
- oom: the innermost frames construct DeepSpeed's ZeRO optimizer (`deepspeed.initialize` -> `_configure_optimizer`
  -> `_configure_zero_optimizer` -> `DeepSpeedZeroOptimizer[_Stage3](...)`, its `__init__`, its fp32 partitions and
  optimizer states): that constructor allocates the run's largest buffers (the fp32 master weights, the gradient
  partitions, the optimizer states, pinned host buffers under offload) and does no other work a configuration could
  break without its own message; or they are inside torch's allocator (`torch/cuda/memory.py`,
  `caching_allocator_alloc`). All four logs of batches 1-11 with a `_configure_zero_optimizer` frame are labelled oom.
- comm_error: the innermost frames wait on other ranks without a tensor of their own: a barrier
  (`barrier`, `monitored_barrier`, `_store_based_barrier`), `init_process_group` / `new_group`, a rendezvous or the
  c10d store (`TCPStore`, `rendezvous`, `_create_c10d_store`): these fail only on a timeout or a broken connection.
  Collectives that carry tensors (`all_reduce`, `broadcast`, ...) stay out: they also raise for a tensor on the wrong
  device or of the wrong size, a bug (batch 11's DeepSpeed#5203, cut in `dist.all_reduce`, is labelled crashed).
  Known limit: NCCL's barrier all-reduces a one-element device tensor, so a sick or full GPU also raises there
  (the corpus's bigscience tr1-13B restart, `RuntimeError: CUDA error: out of memory` under `barrier`, labelled
  node_failure: cut before that line it would read as comm_error; the crash it read as before was wrong too).
- config_error: the innermost frames build or load a compiled extension (`torch.utils.cpp_extension.load`,
  `_jit_compile`, DeepSpeed's `op_builder` `load`/`jit_load`: an op build failure, the batches' rule), validate the
  run's arguments (`validate_args`, `__post_init__` of a config dataclass, argparse), raise OmegaConf's error for a
  key (`format_and_raise`), or run a library's import (an installed package's `<module>` frame among the innermost
  ones, reached through `import`/`importlib`: the environment does not provide what the package needs at import).
Measured (tests/logs/test_issue17_judge11a.py names the excerpts): on the logs of batches 1-11 and the corpus that end
inside a traceback with no exception line, the rules name a family for 10 logs, each the label's (batch 11: 2 oom, 1
comm_error, 3 config_error that had read as crashed or unknown); cutting every complete traceback of the fixtures
just before its exception line (53 read), the rules fire on 4, 3 of them the label's (the barrier case above).
The frames are read in the renderings the batches hold: Python's (`File "x.py", line 3, in f`, behind rank, host,
timestamp, Ray-worker or logger prefixes), IPython's (`File /x.py:3, in C.f(self)` and `/x.py in f(self)` with
`-> 3` / `---> 3` code lines) and rich's (`│ /x.py:3 in f │` with `❱ 3 │` code lines). Not a stack dump of a live
process (faulthandler, py-spy: 'most recent call first'), which is a hang's evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from analysis.logs.logtext import message_of
from launcher.core.kinds import FailureKind

CUT_TAIL_LINES = 16  # the last frame must stand among the log's last lines (non-blank), code lines after it
MAX_FRAME_LINES = 80  # lines read back from the end while frames go on
GAP_LINES = 8  # code or wrapped lines allowed between two frame headers
RULE_DEPTH = 3  # innermost frames a rule looks at (FrameRule.depth; the import rule)

# Prefixes a frame line carries in the batches' logs, after message_of's rank/host/timestamp: Ray's worker prefix
# "(MegatronPolicyWorker[rank=8] pid=3294808, ip=10.109.19.209) ", a logger's "[INFO] [Driver] ", a rich box "│ ".
_RAY = re.compile(r"^\((?:\w[\w\[\]=:.-]{0,80}) pid=\d{1,9}(?:, ip=[\d.]{7,40})?\)\s{0,4}")
_LOGGER_TAGS = re.compile(r"^(?:\[[A-Za-z][\w .-]{0,30}\]\s{0,4}){1,3}(?=\S)")
_BOX = "│|"
_FRAME_HEAD = re.compile(
    r'^\s{0,16}File "(?P<p1>[^"\n]{1,400})", line \d{1,7}, in (?P<f1>[\w<>.]{1,200})'  # Python
    r"|^\s{0,16}File (?P<p2>[^\s,]{1,400}\.py):\d{1,7}, in (?P<f2>[\w<>.]{1,200})"  # IPython >= 8
    r"|^\s{0,4}(?P<p3>[^\s│|]{1,400}\.pyx?) in (?P<f3>[\w<>.]{1,200})\("  # IPython < 8
    r"|^\s{0,4}(?P<p4>[^\s│|]{1,400}\.py):\d{1,7} in\b\s{0,4}(?P<f4>[\w<>.]{0,200})")  # rich
# Lines that end a traceback or are not part of one: its exception line, its header, a chained traceback's text.
_NOT_FRAME_TEXT = re.compile(r"^\s{0,8}(?:(?:[A-Za-z_]\w{0,60}\.){0,6}[A-Za-z]\w{0,60}(?:Error|Exception|Interrupt)"
                             r"\b:?|Traceback \(most recent call last\)|During handling of|The above exception)")
_STAMP_ONLY = re.compile(r"^\s{0,8}\[?\d{4}-\d\d-\d\d[T ][\d:.,]{8,20}Z?\]?\s{0,4}$")
_HEADER = "Traceback (most recent call last)"
_DUMP_HEADER = "most recent call first"


@dataclass(frozen=True)
class Frame:
    path: str
    function: str
    code: str  # the source lines printed under the frame header, joined
    at: int  # index of the frame's header in the tail it was read from (0: the log's last line)


# A source line as IPython ("   1474 code", "-> 1474 code", "---> 56 code") and rich ("❱ 1731 │ code") number it.
_NUMBERED = re.compile(r"^\s{0,16}(?:-{1,4}>\s{0,4}|❱\s{0,4})?\d{1,7}\s")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _is_code(line: str, head_indent: int) -> bool:
    """Can `line` be source code printed under a frame header indented by head_indent? Python indents it deeper,
    IPython and rich number it; a rendering that flattened the frames (a logger re-printing them at column 0)
    flattened the code too."""
    return _indent(line) > head_indent or _NUMBERED.match(line) is not None or head_indent == 0


def frame_text(line: str) -> str:
    """A tail line without the prefixes a frame can carry (rank, host, timestamp, Ray worker, logger tags, rich
    box)."""
    body = message_of(line)
    body = _RAY.sub("", body, count=1)
    body = _LOGGER_TAGS.sub("", body, count=1).rstrip()
    if body[-1:] and body[-1] in _BOX:  # rich's box: "│ /x.py:3 in f   │" (str methods: a line of spaces stays linear)
        body = body[:-1].rstrip()
    head = body.lstrip()
    if head[:1] and head[0] in _BOX and len(body) - len(head) <= 4:
        body = head[2:] if head[1:2] == " " else head[1:]
    return body


def cut_traceback(tail: list[str]) -> list[Frame] | None:
    """The frames of a traceback the log ends inside, innermost first; None when the log does not end in one
    (`tail`: the log's last non-blank lines, last first)."""
    frames: list[Frame] = []
    code: list[str] = []
    since_head = 0
    for i, raw in enumerate(tail[:MAX_FRAME_LINES]):
        if _DUMP_HEADER in raw:
            return None  # a stack dump of a live process, not a raised exception
        line = frame_text(raw)
        if not line.strip() or _STAMP_ONLY.match(line):
            continue  # a prefix or a timestamp with nothing after it: a blank line of the job's
        head = _FRAME_HEAD.match(line)
        if head is not None:
            if not frames and not all(_is_code(c, _indent(line)) for c in code):
                return None  # a record after the frames (a step, a log line): the job went on
            path = next(g for g in (head.group("p1"), head.group("p2"), head.group("p3"), head.group("p4")) if g)
            func = next((g for g in (head.group("f1"), head.group("f2"), head.group("f3"), head.group("f4")) if g),
                        "")
            if not func and code:  # rich wraps a long path: the function stands on the next line
                func = code[-1].split()[0] if code[-1].split() else ""  # (code is last line first)
            func = func.rsplit(".", 1)[-1]  # IPython's "DeepSpeedEngine._configure_zero_optimizer"
            frames.append(Frame(path.replace("\\", "/"), func, " ".join(c.strip() for c in reversed(code)), i))
            code, since_head = [], 0
            continue
        if _HEADER in line or _NOT_FRAME_TEXT.match(line):
            break
        if not frames and i >= CUT_TAIL_LINES:
            return None
        since_head += 1
        if frames and since_head > GAP_LINES:
            break
        code.append(line)
    return frames or None


# ---- the rules, each on the innermost RULE_DEPTH frames (path, function and code, as one string per frame)


@dataclass(frozen=True)
class FrameRule:
    kind: FailureKind
    label: str
    shape: re.Pattern[str]  # matched against "path | function | code" of one of the innermost frames
    depth: int = 3  # how many of the innermost frames the shape is tested on


IMPORT_LABEL = ("the job's environment does not provide what a package needs at import (the traceback is cut while "
                "an installed package is imported)")
RULES = (
    FrameRule(FailureKind.OOM, "out of memory (the traceback is cut inside the ZeRO optimizer's construction, which "
                               "allocates the fp32 partitions, gradients and optimizer states)",
              re.compile(r"\|\s_configure_zero_optimizer\s\||DeepSpeedZeroOptimizer(?:_Stage\d)?\(|"
                         r"deepspeed/runtime/zero/stage(?:3|_1_and_2|1|2)\.py \| (?:__init__|_create_fp32_partitions|"
                         r"initialize_optimizer_states|_setup_for_real_optimizer|_create_fp16_partitions\w{0,40}) \|")),
    FrameRule(FailureKind.OOM, "out of memory (the traceback is cut inside torch's CUDA allocator)",
              re.compile(r"torch/cuda/memory\.py \||\|\scaching_allocator_alloc\s\|")),
    FrameRule(FailureKind.COMM_ERROR, "communication error (the traceback is cut in a barrier, process-group set-up "
                                      "or rendezvous, which fails only on a timeout or a broken connection)",
              re.compile(r"torch/distributed/\S{0,80}\.py \| (?:barrier|monitored_barrier|_store_based_barrier|"
                         r"init_process_group|new_group|_new_process_group_helper|rendezvous|_create_c10d_store|"
                         r"_create_tcp_store|next_rendezvous|_rendezvous_helper|_env_rendezvous_handler|"
                         r"_tcp_rendezvous_handler) \||\|\s(?:TCPStore|_store_based_barrier)\s\|")),
    FrameRule(FailureKind.CONFIG_ERROR, "a compiled extension failed to build or load (the traceback is cut in "
                                        "torch.utils.cpp_extension / DeepSpeed's op builder)",
              re.compile(r"torch/utils/cpp_extension\.py \||\bcpp_extension\.load(?:_inline)?\(|"
                         r"op_builder/\w{1,60}\.py \| (?:load|jit_load|build|builder) \|")),
    FrameRule(FailureKind.CONFIG_ERROR, "invalid configuration (the traceback is cut in the run's argument or config "
                                        "validation)",
              re.compile(r"\|\s(?:validate_args|_validate_args|__post_init__|parse_args|parse_known_args)\s\||"
                         r"/argparse\.py \|")),
    # OmegaConf raises every key, type and value error through format_and_raise -> _raise, which re-raises with
    # the original traceback (`raise ex.with_traceback(sys.exc_info()[2])`): the frames of the lookup that failed
    # then stand inside it, so the raise path may be a few frames out (data2vec-pytorch#17: five frames)
    FrameRule(FailureKind.CONFIG_ERROR, "invalid configuration (the traceback is cut in OmegaConf's raise of a "
                                        "config key error)",
              re.compile(r"omegaconf/_utils\.py \| (?:format_and_raise|_raise) \|"), depth=12),
    FrameRule(FailureKind.CONFIG_ERROR, IMPORT_LABEL, re.compile(r"importlib/__init__\.py \| import_module \|")),
)
# An installed package's module body (`<module>` in site-/dist-packages) is an import only when its caller is one
# too (another `<module>` frame, importlib): a module run as the program (`python -m deepspeed.launcher.launch`,
# called from runpy's `_run_code`) is not being imported.
_PACKAGE = re.compile(r"(?:site|dist)-packages/")
_IMPORTER = re.compile(r"importlib|<frozen importlib")


def _imported(frames: list[Frame], k: int) -> bool:
    """Is frames[k] an installed package's module body run by an import?"""
    if frames[k].function != "<module>" or _PACKAGE.search(frames[k].path) is None or k + 1 >= len(frames):
        return False
    caller = frames[k + 1]
    return caller.function == "<module>" or _IMPORTER.search(caller.path) is not None


def _key(frame: Frame) -> str:
    return f"{frame.path} | {frame.function} | {frame.code}"


def cut_frames_family(frames: list[Frame]) -> FrameRule | None:
    """The first rule whose shape one of the innermost frames matches; None when no rule does (a crash)."""
    keys = [_key(f) for f in frames]
    for rule in RULES:
        if any(rule.shape.search(k) for k in keys[:rule.depth]):
            return rule
    if any(_imported(frames, k) for k in range(min(RULE_DEPTH, len(frames)))):
        return RULES[-1]
    return None
