"""What every settings group shares: the environment prefix, the error a bad value raises, and
the group's model configuration."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

ENV_PREFIX = "OME_"
ENV_NESTED_DELIMITER = "__"


class SettingsError(ValueError):
    """A setting whose value cannot work; the message names the variable, the value and the fix."""


class SettingsGroup(BaseModel):
    """One group of `workers.config.Settings` (`OME_<GROUP>__<FIELD>`)."""

    # Field docstrings become descriptions, so `Settings.model_json_schema()` and the README
    # table say the same thing as the code.
    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)
