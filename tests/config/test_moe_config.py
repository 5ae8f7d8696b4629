"""The model's mixture-of-experts fields: derived defaults and the checks run at load."""

from __future__ import annotations

import pytest

from launcher.config.checks import check_model
from launcher.config.schema import ModelConfig
from launcher.core.errors import ConfigError

DENSE = dict(name="m", layers=2, hidden=64, heads=4, seq_len=128, vocab=256)


def test_an_moe_model_takes_its_expert_size_from_the_dense_ffn_unless_given():
    moe = ModelConfig(**DENSE, num_experts=4)
    assert moe.is_moe and moe.moe_ffn_hidden == moe.ffn_hidden == 256
    assert ModelConfig(**DENSE, num_experts=4, moe_ffn_hidden=96).moe_ffn_hidden == 96
    dense = ModelConfig(**DENSE)
    assert not dense.is_moe and dense.moe_ffn_hidden == 0
    check_model(moe)
    check_model(dense)


@pytest.mark.parametrize("fields, text", [
    (dict(num_experts=-1), "model.num_experts=-1"),
    (dict(num_experts=4, moe_topk=5), "model.moe_topk=5: use 1 to num_experts (4)"),
    (dict(num_experts=4, moe_topk=0), "model.moe_topk=0"),
    (dict(moe_ffn_hidden=128), "model.moe_ffn_hidden=128: configures MoE layers but model.num_experts is 0"),
    (dict(shared_expert_ffn_hidden=128), "model.shared_expert_ffn_hidden=128: configures MoE layers"),
    (dict(moe_aux_loss_coeff=0.01), "model.moe_aux_loss_coeff=0.01: configures MoE layers"),
    (dict(num_experts=4, shared_expert_ffn_hidden=-8), "model.shared_expert_ffn_hidden=-8: use 0 (none)"),
    (dict(num_experts=4, moe_aux_loss_coeff=-0.1), "model.moe_aux_loss_coeff=-0.1"),
])
def test_bad_expert_fields_are_named_with_value_and_fix(fields, text):
    with pytest.raises(ConfigError) as err:
        check_model(ModelConfig(**DENSE, **fields))
    assert text in str(err.value)
