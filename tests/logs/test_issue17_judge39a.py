"""Issue 17 (helper judge39a): batch 34's remaining misses as families. The Hugging Face Trainer's log_history as
trainer_state.json prints it (one key a line), a trainer's own dicts with a step counter and a learning rate but no
plain `loss` (OntoProtein's {'mlm': ..., 'global_step': N, 'learning_rate': [...]}), and TorchRL's `loss_<term>` keys
are step records. Each: real lines with their source, look-alikes that must not match."""

from __future__ import annotations

import math

from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_generic import read_records
from analysis.logs.parse_hf import trainer_records
from launcher.core.kinds import FailureKind

# ---- 1. the pretty-printed log_history
# transformers TrainerState.save_to_json: json.dumps(asdict(state), indent=2, sort_keys=True). The entries below are
# from eric-mitchell/direct-preference-optimization issue 36 (a TRL DPOTrainer run's evaluations at steps 500 and
# 1000, quoted in the comment as printed: the reporter's paste drops the comma between entries), shortened.
_HISTORY = """Above were training logs.

"log_history": [
    {
      "epoch": 0.09,
      "eval_logits/chosen": -0.8852691054344177,
      "eval_loss": 0.2819069027900696,
      "eval_rewards/accuracies": 0.86328125,
      "eval_runtime": 204.6538,
      "eval_samples_per_second": 1.251,
      "eval_steps_per_second": 0.313,
      "step": 500
    }
    {
      "epoch": 0.18,
      "eval_logits/chosen": -0.7912834286689758,
      "eval_loss": 0.2211304008960724,
      "eval_rewards/accuracies": 0.87109375,
      "eval_runtime": 208.8261,
      "eval_samples_per_second": 1.226,
      "eval_steps_per_second": 0.306,
      "step": 1000
    }
"""
# A training entry as the Trainer logs it (trainer.py _maybe_log_save_evaluate: loss, grad_norm, learning_rate, epoch,
# and the state's step), in the same indent=2, sort_keys form.
_TRAIN_ENTRIES = """  "log_history": [
    {
      "epoch": 0.01,
      "grad_norm": 3.21,
      "learning_rate": 4.9e-05,
      "loss": 2.3456,
      "step": 10
    },
    {
      "epoch": 0.02,
      "grad_norm": NaN,
      "learning_rate": 4.8e-05,
      "loss": NaN,
      "step": 20
    }
  ],
"""


def test_log_history_entries_are_step_records_and_the_run_is_ok():
    found = trainer_records(_HISTORY)
    assert found is not None and found.n_records == 2 and found.losses == ()
    assert found.last_pos == _HISTORY.rindex("    {")
    out = trial_outcome(_HISTORY)
    assert out.failure_kind == FailureKind.OK.value
    assert out.metrics.get("step_time_s") is None  # an evaluation's runtime and rates are no training step's time


def test_log_history_training_losses_are_read_nan_kept():
    found = trainer_records(_TRAIN_ENTRIES)
    assert found is not None and found.n_records == 2
    assert found.losses[0] == 2.3456 and math.isnan(found.losses[1])


def test_an_entry_without_a_step_or_nested_values_is_no_record():
    no_step = _HISTORY.replace('"step": 500', '"stage": 500').replace('"step": 1000', '"stage": 1000')
    assert trainer_records(no_step) is None
    nested = '"log_history": [\n    {\n      "step": 5,\n      "metrics": {\n        "loss": 1.0\n      }\n    }\n'
    assert trainer_records(nested) is None
    # the same block without its log_history key: a JSON dump of something else
    assert trainer_records(_HISTORY.replace('"log_history": [', '"configs": [')) is None


# ---- 2. a trainer's own logs dict: a step counter and a learning rate, losses under their objectives' names
# zjunlp/OntoProtein issue 20 (the run_pretrain.py records pasted in the description); src/trainer.py train():
# all_loss['global_step'] = step; all_loss['learning_rate'] = self.get_learning_rate(); print(all_loss).
_ONTO = (
    "{'mlm': 1.3232421875, 'protein_go_ke': 0.66796875, 'go_go_ke': 1.9619140625, 'global_step': 180, "
    "'learning_rate': [9.965326633165831e-06, 9.965326633165831e-06, 1.9930653266331662e-05]}\n"
    "{'mlm': 0.77783203125, 'protein_go_ke': 0.66650390625, 'go_go_ke': 1.857421875, 'global_step': 181, "
    "'learning_rate': [9.964824120603016e-06, 9.964824120603016e-06, 1.9929648241206033e-05]}\n"
)


def test_step_and_learning_rate_dicts_are_records_and_the_run_is_ok():
    found = trainer_records(_ONTO)
    assert found is not None and found.n_records == 2 and found.losses == ()  # "mlm" is not read as a loss
    assert trial_outcome(_ONTO).failure_kind == FailureKind.OK.value


def test_one_dict_or_dicts_without_a_learning_rate_or_advance_are_no_run():
    first = _ONTO.splitlines()[0]
    assert trainer_records(first + "\n") is None  # a checkpoint's or a config's single dict
    assert trainer_records(first + "\n" + first + "\n") is None  # the step does not advance
    assert trainer_records(_ONTO.replace("'learning_rate'", "'lr_groups'")) is None
    # the Trainer's own dicts with a loss still give it (a NaN kept)
    hf = ("{'loss': 2.1, 'learning_rate': 5e-05, 'epoch': 0.1, 'step': 10}\n"
          "{'loss': nan, 'learning_rate': 5e-05, 'epoch': 0.2, 'step': 20}\n")
    found = trainer_records(hf)
    assert found is not None and found.losses[0] == 2.1 and math.isnan(found.losses[1])


# ---- 3. TorchRL's loss terms, `loss_<term>`
# github AnnLIU15/hppo-mac logs/train.log (commit 2a1dd9d3af8c), a TorchRL PPO loop logging ClipPPOLoss's TensorDict
# (torchrl/objectives/ppo.py: loss_objective, loss_critic, loss_entropy) with loguru.
_PPO = """2025-11-07 10:20:10.412 | INFO     | __main__:_log_metrics:8 - iter=0000 reward=-147.0503 ESS=0.0428 clip_fraction=0.9844 entropy=1.0878 explained_variance=0.4774 kl_approx=inf loss_critic=752.9158 loss_entropy=-0.0109 loss_objective=0.2931
2025-11-07 10:20:12.440 | INFO     | __main__:_log_metrics:8 - iter=0001 reward=-42.7923 ESS=0.5526 clip_fraction=0.5156 entropy=2.4073 explained_variance=0.9668 kl_approx=inf loss_critic=175.9523 loss_entropy=-0.0241 loss_objective=0.1098
2025-11-07 10:20:14.119 | INFO     | __main__:_log_metrics:8 - iter=0002 reward=7.0483 ESS=0.6914 clip_fraction=0.4375 entropy=1.8919 explained_variance=0.2987 kl_approx=inf loss_critic=82.0351 loss_entropy=-0.0189 loss_objective=-0.0623
"""  # noqa: E501


def test_loss_terms_make_step_records_timed_by_their_timestamps():
    reading = read_records(_PPO)
    assert reading.n_records == 3
    assert reading.losses == (752.9158, 175.9523, 82.0351)
    assert reading.iterations and abs(reading.iterations[-1].step_time_s - 1.679) < 1e-6
    assert trial_outcome(_PPO).failure_kind == FailureKind.OK.value


def test_settings_of_a_loss_are_no_loss():
    for key in ("loss_scale", "loss_weight", "loss_coef", "loss_lambda", "loss_type"):
        line = f"iter=0001 {key}=1024.0\niter=0002 {key}=1024.0\n"
        assert read_records(line).n_records == 0, key
