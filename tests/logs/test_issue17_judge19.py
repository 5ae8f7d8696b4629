"""Issue 17, batch 18's configuration misses as families (helper judge19): the job script's own shell errors before
training (bash's `<script>: line N: ...`), and a library refusing an option for a value the run named. Each family:
real lines from a fixture (cited), made-up look-alikes that must not match."""

from __future__ import annotations

from analysis.logs.families import first_match
from analysis.logs.families.config import SHELL_SCRIPT, is_config_message
from analysis.logs.outcome import trial_outcome

# tests/fixtures/oos-batch18/megatron_deepspeed/lock_clock_dual32_batch_script_ld_library_path_unbound_1.log
_UNBOUND = ".context/dual32_tp4pp1dp8_batch.sh: line 11: LD_LIBRARY_PATH: unbound variable\n"
# tests/fixtures/oos-batch18/hf_trainer/gemma4_26b_swift_fsdp2_packing_template_unsupported_1.log
_TEMPLATE = "[rank1]: ValueError: Template `gemma4` does not support padding free or packing.\n"
_STEP = ("  iteration       20/    1000 | consumed samples:          320 | elapsed time per iteration (ms): 1751.8 | "
         "learning rate: 1.000E-06 | global batch size:    16 | lm loss: 1.028959E+01 | loss scale: 1.0 |\n")


def _kind(text: str) -> str:
    return trial_outcome(text).failure_kind


def test_the_scripts_shell_error_before_training_is_a_configuration_error():
    assert _kind(_UNBOUND) == "config_error"
    for made_up in ("/var/spool/slurmd/job4711/slurm_script: line 23: torchrun: command not found\n",
                    "launch.sh: line 7: /opt/venvs/train/bin/activate: No such file or directory\n",
                    "train.sbatch: line 40: syntax error near unexpected token `fi'\n",
                    "node01: run.sh: line 3: MASTER_ADDR: unbound variable\n"):
        assert first_match(made_up, SHELL_SCRIPT) is not None, made_up
        assert _kind(made_up) == "config_error", made_up


def test_shell_look_alikes_and_errors_after_training_are_not_this_family():
    for look_alike in ("WARNING: LD_LIBRARY_PATH: unbound variable in the docs\n",  # no `<script>: line N:` form
                       "FileNotFoundError: [Errno 2] No such file or directory: '/data/x.bin'\n",  # Python's, no line
                       "note: fixed run.sh: line 3: MASTER_ADDR: unbound variable\n",  # quoted inside a sentence
                       "run.sh: line 12: TOKENS: unbound variable (ignored, default used)\n",  # not bash's whole line
                       "sh: 1: nvidia-smi: not found\n"):  # dash's form says `1:` without `line`
        assert first_match(look_alike, SHELL_SCRIPT) is None, look_alike
    assert _kind(_STEP + _UNBOUND) != "config_error"  # a step came before: not a run that never started


def test_a_library_refusing_an_option_for_a_named_value_is_a_configuration_error():
    assert _kind(_TEMPLATE) == "config_error"
    assert is_config_message("ValueError", "Template `gemma4` does not support padding free or packing.")
    assert is_config_message("NotImplementedError", "Model 'mamba2' does not support sequence packing")


def test_unquoted_or_other_types_of_does_not_support_are_not_this_rule():
    # made up: the program's own object, or an error type set-up checks do not raise for options
    assert not is_config_message("ValueError", "this tensor does not support in-place resize")
    assert not is_config_message("TypeError", "Template `gemma4` does not support padding free or packing.")
    assert not is_config_message("KeyError", "'gemma4' does not support x")


def test_a_shell_error_the_script_went_on_after_is_not_the_cause():
    # tests/fixtures/oos-batch17/megatron_lm/attn_bench_llama_pretrain_step_cancelled_time_limit_1.log line 3: the
    # script had no `set -e`, so training started after it; made-up continuation
    went_on = ("/var/spool/slurmd/job2403450/slurm_script: line 373: python: command not found\n"
               "using world size: 8, data-parallel size: 8, context-parallel size: 1, tensor-model-parallel size: 1\n")
    assert _kind(went_on) != "config_error"
    stopped = _UNBOUND + "srun: error: node01: task 0: Exited with exit code 1\n"  # the scheduler's lines may follow
    assert _kind(stopped) == "config_error"


def test_each_shell_row_example_alone_is_a_configuration_error():
    # test_families' harness prints "more output" after each example, which this family reads as the script going on
    for row in SHELL_SCRIPT:
        assert row.needle in row.example and _kind(f"start-up output\n{row.example}\n") == "config_error", row.example
        assert _kind(f"start-up output\n{row.example}\nmore output\n") != "config_error", row.example
