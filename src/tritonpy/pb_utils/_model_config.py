# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""pb_utils.ModelConfig: what ``TritonPythonModel.auto_complete_config``
receives and returns.

The stub builds one from the config Triton has for the model (a
``config.pbtxt``, a minimal one, or none at all), the model fills in what is
missing, and the backend hands the result back to Triton. Every setter
refuses to contradict what the config already says, with a ``ValueError``
naming the model and the field: such an error fails the model's load.
"""

from __future__ import annotations

import copy
import json
import numbers
from typing import Any

from ._dtypes import TRITON_STRING_TO_NUMPY

__all__ = ["ModelConfig"]

# Config type strings a tensor may have ("TYPE_BF16" has no numpy type but
# is a valid config type).
_CONFIG_TYPES = frozenset(TRITON_STRING_TO_NUMPY) | {"TYPE_BF16"}
_INPUT_KEYS = ("name", "data_type", "dims", "optional")
_OUTPUT_KEYS = ("name", "data_type", "dims")
_POLICY_KEYS = ("decoupled",)
# Scheduling choices other than dynamic batching (a config has at most one).
_OTHER_SCHEDULERS = ("sequence_batching", "ensemble_scheduling")


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class ModelConfig:
    """A model configuration being completed by ``auto_complete_config``.

    ``ModelConfig(model_config)`` takes the config as JSON text (as the
    official backend does) or as a dict, which is copied.
    """

    def __init__(self, model_config: str | bytes | dict[str, Any]) -> None:
        if isinstance(model_config, (str, bytes)):
            parsed = json.loads(model_config)
        else:
            parsed = copy.deepcopy(model_config)
        if not isinstance(parsed, dict):
            raise ValueError("a model config must be a JSON object")
        parsed.setdefault("input", [])
        parsed.setdefault("output", [])
        self._config: dict[str, Any] = parsed

    def __repr__(self) -> str:
        return f"ModelConfig({json.dumps(self._config, sort_keys=True)})"

    def _name(self) -> str:
        return str(self._config.get("name", ""))

    def _error(self, what: str) -> ValueError:
        return ValueError(f"model '{self._name()}': {what}")

    # ---------------------------------------------------------------- reading

    def as_dict(self) -> dict[str, Any]:
        """The configuration as a dict (Triton's JSON form of the config).

        The dict is the object's own: read it, and change the config through
        the setters, which check what they change.
        """
        return self._config

    def max_batch_size(self) -> int:
        """The config's ``max_batch_size`` (0: the model does not batch)."""
        return int(self._config.get("max_batch_size", 0))

    # ---------------------------------------------------------------- setting

    def set_max_batch_size(self, max_batch_size: int) -> None:
        """Make the model batch up to ``max_batch_size`` (0: no batching).

        The value is the most the model can take. A config that already
        sets a smaller non-zero ``max_batch_size`` keeps it; one that sets a
        larger value contradicts the model: ``ValueError``.
        """
        if not _is_int(max_batch_size) or max_batch_size < 0:
            raise self._error(f"set_max_batch_size() takes an integer >= 0, got {max_batch_size!r}")
        current = self.max_batch_size()
        if current > max_batch_size:
            raise self._error(
                f"the configuration sets max_batch_size {current}, more than the "
                f"{max_batch_size} the model supports"
            )
        if current == 0:
            self._config["max_batch_size"] = int(max_batch_size)

    def set_dynamic_batching(self) -> None:
        """Use the dynamic batcher with default settings, unless the config
        already has one (then nothing changes). ``ValueError`` if the config
        chose another scheduler (sequence batching, ensemble scheduling)."""
        for other in _OTHER_SCHEDULERS:
            if other in self._config:
                raise self._error(
                    f"the configuration uses {other}; set_dynamic_batching() cannot replace it"
                )
        self._config.setdefault("dynamic_batching", {})

    def add_input(self, input: dict[str, Any]) -> None:  # noqa: A002 - official name
        """Declare an input: ``{"name", "data_type", "dims"}`` and optionally
        ``"optional"``. An input of that name already in the config must
        agree on every field both give; it is completed, not duplicated."""
        self._add_tensor("input", input, _INPUT_KEYS)

    def add_output(self, output: dict[str, Any]) -> None:
        """Declare an output: ``{"name", "data_type", "dims"}``, checked
        against an output of that name already in the config as
        ``add_input`` does."""
        self._add_tensor("output", output, _OUTPUT_KEYS)

    def set_model_transaction_policy(self, transaction_policy_dict: dict[str, Any]) -> None:
        """Set ``model_transaction_policy``; the only key is ``"decoupled"``
        (a bool). ``ValueError`` if the config already says otherwise."""
        if not isinstance(transaction_policy_dict, dict):
            raise self._error("set_model_transaction_policy() takes a dict")
        unknown = sorted(set(transaction_policy_dict) - set(_POLICY_KEYS))
        if unknown:
            raise self._error(
                f"model_transaction_policy has no field {', '.join(map(repr, unknown))} "
                "(only 'decoupled')"
            )
        policy = self._config.setdefault("model_transaction_policy", {})
        if "decoupled" not in transaction_policy_dict:
            return
        decoupled = transaction_policy_dict["decoupled"]
        if not isinstance(decoupled, bool):
            raise self._error(f"'decoupled' must be True or False, got {decoupled!r}")
        if "decoupled" in policy and bool(policy["decoupled"]) != decoupled:
            raise self._error(
                f"the configuration sets decoupled {bool(policy['decoupled'])}, the model "
                f"asks for decoupled {decoupled}"
            )
        policy["decoupled"] = decoupled

    # ---------------------------------------------------------------- helpers

    def _add_tensor(self, section: str, tensor: dict[str, Any], keys: tuple[str, ...]) -> None:
        if not isinstance(tensor, dict):
            raise self._error(f"add_{section}() takes a dict, got {type(tensor).__name__}")
        name = tensor.get("name")
        label = f"{section} '{name}'" if isinstance(name, str) else section
        unknown = sorted(set(tensor) - set(keys))
        if unknown:
            raise self._error(
                f"{label} has field {', '.join(map(repr, unknown))}; an {section} takes "
                f"only {', '.join(map(repr, keys))}"
            )
        for key in ("name", "data_type", "dims"):
            if key not in tensor:
                raise self._error(f"{label} has no '{key}'")
        if not isinstance(name, str) or not name:
            raise self._error(f"{section} name must be a non-empty string, got {name!r}")
        data_type = tensor["data_type"]
        if data_type not in _CONFIG_TYPES:
            raise self._error(
                f"{label}: data_type {data_type!r} is not a Triton type (e.g. 'TYPE_FP32')"
            )
        dims = tensor["dims"]
        if not isinstance(dims, (list, tuple)) or not all(
            _is_int(d) and (d == -1 or d >= 1) for d in dims
        ):
            raise self._error(
                f"{label}: dims must be a list of integers, each -1 (any size) or at least 1, "
                f"got {dims!r}"
            )
        dims = [int(d) for d in dims]
        optional = tensor.get("optional")
        if "optional" in tensor and not isinstance(optional, bool):
            raise self._error(f"{label}: 'optional' must be True or False, got {optional!r}")

        entries: list[dict[str, Any]] = self._config[section]
        existing = next((e for e in entries if e.get("name") == name), None)
        if existing is None:
            entry: dict[str, Any] = {"name": name, "data_type": data_type, "dims": dims}
            if "optional" in tensor:
                entry["optional"] = optional
            entries.append(entry)
            return
        have_type = existing.get("data_type", "TYPE_INVALID")
        if have_type not in ("", "TYPE_INVALID") and have_type != data_type:
            raise self._error(
                f"the configuration gives {label} data_type {have_type}, the model {data_type}"
            )
        have_dims = [int(d) for d in existing.get("dims") or ()]
        if have_dims and have_dims != dims:
            raise self._error(f"the configuration gives {label} dims {have_dims}, the model {dims}")
        if "optional" in tensor and "optional" in existing and existing["optional"] != optional:
            raise self._error(
                f"the configuration gives {label} optional {existing['optional']}, "
                f"the model {optional}"
            )
        existing["data_type"] = data_type
        existing["dims"] = dims
        if "optional" in tensor:
            existing["optional"] = optional
