# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""pb_utils.ModelConfig, the object auto_complete_config completes: what
each setter adds, and every way it refuses to contradict the config."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from tritonpy import pb_utils as pb


def config(**fields: Any) -> pb.ModelConfig:
    return pb.ModelConfig(json.dumps({"name": "m", "max_batch_size": 0, **fields}))


FP32_4 = {"name": "X", "data_type": "TYPE_FP32", "dims": [4]}


def test_takes_json_text_or_a_dict_and_fills_the_tensor_lists() -> None:
    from_text = pb.ModelConfig('{"name": "m"}')
    assert from_text.as_dict() == {"name": "m", "input": [], "output": []}
    original = {"name": "m", "input": [dict(FP32_4)]}
    from_dict = pb.ModelConfig(original)
    from_dict.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [4]})
    assert original == {"name": "m", "input": [FP32_4]}  # copied, not changed
    assert "ModelConfig(" in repr(from_dict) and '"Y"' in repr(from_dict)
    with pytest.raises(ValueError, match="JSON object"):
        pb.ModelConfig("[1, 2]")


def test_completing_an_empty_config() -> None:
    c = config()
    c.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": (2, -1), "optional": True})
    c.add_output({"name": "Y", "data_type": "TYPE_STRING", "dims": [np.int64(1)]})
    c.set_max_batch_size(8)
    c.set_dynamic_batching()
    c.set_model_transaction_policy({"decoupled": True})
    d = c.as_dict()
    assert d["input"] == [
        {"name": "X", "data_type": "TYPE_FP32", "dims": [2, -1], "optional": True}
    ]
    assert d["output"] == [{"name": "Y", "data_type": "TYPE_STRING", "dims": [1]}]
    assert c.max_batch_size() == 8 and d["max_batch_size"] == 8
    assert d["dynamic_batching"] == {}
    assert d["model_transaction_policy"] == {"decoupled": True}
    json.dumps(d)  # numpy ints became plain ints


def test_as_dict_is_the_live_config() -> None:
    c = config()
    c.as_dict()["parameters"] = {"k": {"string_value": "v"}}
    assert c.as_dict()["parameters"]["k"]["string_value"] == "v"


def test_existing_tensor_is_completed_not_duplicated() -> None:
    c = config(input=[{"name": "X", "data_type": "TYPE_INVALID", "dims": []}])
    c.add_input(FP32_4)
    c.add_input(FP32_4)  # the same again agrees with itself
    assert c.as_dict()["input"] == [FP32_4]


@pytest.mark.parametrize(
    "existing,added,needle",
    [
        (
            {"data_type": "TYPE_INT32", "dims": [4]},
            FP32_4,
            "data_type TYPE_INT32, the model TYPE_FP32",
        ),
        ({"data_type": "TYPE_FP32", "dims": [3]}, FP32_4, "dims [3], the model [4]"),
        (
            {"data_type": "TYPE_FP32", "dims": [4], "optional": False},
            {**FP32_4, "optional": True},
            "optional False, the model True",
        ),
    ],
    ids=["dtype", "dims", "optional"],
)
def test_conflicting_input_is_refused(existing: dict, added: dict, needle: str) -> None:
    c = config(input=[{"name": "X", **existing}])
    with pytest.raises(ValueError) as e:
        c.add_input(added)
    assert "model 'm'" in str(e.value) and "input 'X'" in str(e.value) and needle in str(e.value)
    assert c.as_dict()["input"] == [{"name": "X", **existing}]  # unchanged


def test_conflicting_output_is_refused() -> None:
    c = config(output=[{"name": "Y", "data_type": "TYPE_FP16", "dims": [4]}])
    with pytest.raises(ValueError, match="output 'Y' data_type TYPE_FP16, the model TYPE_FP32"):
        c.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [4]})


@pytest.mark.parametrize(
    "tensor,needle",
    [
        ({"name": "X", "data_type": "TYPE_FP32"}, "has no 'dims'"),
        ({"data_type": "TYPE_FP32", "dims": [1]}, "has no 'name'"),
        ({"name": "", "data_type": "TYPE_FP32", "dims": [1]}, "non-empty string"),
        ({"name": "X", "data_type": "FP32", "dims": [1]}, "'FP32' is not a Triton type"),
        ({"name": "X", "data_type": "TYPE_FP32", "dims": 4}, "dims must be a list"),
        ({"name": "X", "data_type": "TYPE_FP32", "dims": [-2]}, "dims must be a list"),
        (
            {"name": "X", "data_type": "TYPE_FP32", "dims": [4, 0]},
            "each -1 (any size) or at least 1",
        ),
        ({"name": "X", "data_type": "TYPE_FP32", "dims": [True]}, "dims must be a list"),
        ({"name": "X", "data_type": "TYPE_FP32", "dims": [1], "optional": 1}, "True or False"),
        ({"name": "X", "data_type": "TYPE_FP32", "dims": [1], "format": "x"}, "field 'format'"),
    ],
)
def test_malformed_input_is_refused(tensor: dict, needle: str) -> None:
    with pytest.raises(ValueError, match="model 'm'") as e:
        config().add_input(tensor)
    assert needle in str(e.value)


def test_outputs_take_no_optional() -> None:
    with pytest.raises(ValueError, match="field 'optional'"):
        config().add_output({**FP32_4, "optional": True})
    with pytest.raises(ValueError, match="takes a dict"):
        config().add_output(["Y"])  # type: ignore[arg-type]


def test_bf16_is_a_valid_config_type() -> None:
    c = config()
    c.add_input({"name": "B", "data_type": "TYPE_BF16", "dims": [2]})
    assert c.as_dict()["input"][0]["data_type"] == "TYPE_BF16"


def test_max_batch_size_rules() -> None:
    c = config()
    assert c.max_batch_size() == 0
    c.set_max_batch_size(4)
    assert c.max_batch_size() == 4
    # A config that already batches less than the model can keeps its value.
    smaller = config(max_batch_size=2)
    smaller.set_max_batch_size(4)
    assert smaller.max_batch_size() == 2
    # One that batches more than the model can contradicts it.
    larger = config(max_batch_size=16)
    with pytest.raises(ValueError, match="max_batch_size 16, more than the 4 the model supports"):
        larger.set_max_batch_size(4)
    with pytest.raises(ValueError, match="max_batch_size 16, more than the 0"):
        larger.set_max_batch_size(0)
    for bad in (-1, 2.0, True, "4"):
        with pytest.raises(ValueError, match="integer >= 0"):
            c.set_max_batch_size(bad)  # type: ignore[arg-type]
    assert pb.ModelConfig('{"name": "m"}').max_batch_size() == 0


def test_dynamic_batching_keeps_an_existing_batcher_and_refuses_other_schedulers() -> None:
    c = config(dynamic_batching={"max_queue_delay_microseconds": 100})
    c.set_dynamic_batching()
    assert c.as_dict()["dynamic_batching"] == {"max_queue_delay_microseconds": 100}
    for other in ("sequence_batching", "ensemble_scheduling"):
        with pytest.raises(ValueError, match=f"uses {other}"):
            config(**{other: {}}).set_dynamic_batching()


def test_transaction_policy_rules() -> None:
    c = config(model_transaction_policy={"decoupled": False})
    c.set_model_transaction_policy({"decoupled": False})
    with pytest.raises(ValueError, match="sets decoupled False, the model asks for decoupled True"):
        c.set_model_transaction_policy({"decoupled": True})
    with pytest.raises(ValueError, match="no field 'streaming'"):
        c.set_model_transaction_policy({"streaming": True})
    with pytest.raises(ValueError, match="True or False"):
        c.set_model_transaction_policy({"decoupled": "yes"})
    with pytest.raises(ValueError, match="takes a dict"):
        c.set_model_transaction_policy(True)  # type: ignore[arg-type]
    empty = config()
    empty.set_model_transaction_policy({})
    assert empty.as_dict()["model_transaction_policy"] == {}


def test_importable_under_the_official_name() -> None:
    import triton_python_backend_utils as official_name

    assert official_name.ModelConfig is pb.ModelConfig
