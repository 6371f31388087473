"""Parameter blocks that Kedro checks itself, before a run's first node.

Kedro 1.x validates a `params:<name>` node input whose annotation is a dataclass or a
pydantic model: when it reads the run's parameters it builds the type from the block
(`Type(**block)`) and stops the run on an error; without any such annotation it only logs
"No typed parameter requirements found". Each class here is the block itself (a dict, so
nodes, hooks, run records and MLflow read it as before) whose construction runs the block's
own parser from this package, so the checks, the defaults and the messages stay in one
place. Blocks that only parse together with another block (annotate's judge names one of
`endpoints`) are checked by the run's hooks, as before, and are not typed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


# A dataclass without fields: the decorator is what Kedro's validation looks for; copies
# and pickles (Kedro's memory datasets, ParallelRunner) rebuild the dict without a re-check.
@dataclass(init=False, eq=False, repr=False)
class CheckedBlock(dict):
    """A parameter block, checked by its parser when built."""

    def __init__(self, **values: Any) -> None:
        """Check the block, then hold it as written.

        Args:
            **values: the block's settings, as Kedro read them from the parameter files.
        """
        self.check(values)
        super().__init__(values)

    @staticmethod
    def check(values: Mapping[str, Any]) -> None:
        """Raise ConfigError, naming the parameter at fault, when `values` is not valid.

        Args:
            values: the block's settings.
        """
        raise NotImplementedError


# Each parser is imported when a block is checked: a run imports only its own parsers (the
# report's imports scipy and matplotlib).
@dataclass(init=False, eq=False, repr=False)
class ReportBlock(CheckedBlock):
    """`params:report`, checked by `params.report.parse_report`."""

    @staticmethod
    def check(values: Mapping[str, Any]) -> None:
        """Parse `values` as the report block (ConfigError when it is not one).

        Args:
            values: the block's settings.
        """
        from llm_feedback.params.report import parse_report

        parse_report(values)


@dataclass(init=False, eq=False, repr=False)
class DecontaminationBlock(CheckedBlock):
    """`params:decontamination`, checked by `params.decontamination.parse_decontamination`."""

    @staticmethod
    def check(values: Mapping[str, Any]) -> None:
        """Parse `values` as the decontamination block (ConfigError when it is not one).

        Args:
            values: the block's settings.
        """
        from llm_feedback.params.decontamination import parse_decontamination

        parse_decontamination(values)


@dataclass(init=False, eq=False, repr=False)
class EndpointsBlock(CheckedBlock):
    """`params:endpoints`, each definition checked by `backends.endpoints.parse_endpoints`."""

    @staticmethod
    def check(values: Mapping[str, Any]) -> None:
        """Parse `values` as the endpoint definitions (ConfigError when they are not).

        A `credentials:` entry name is not resolved here: conf/local/credentials.yml is
        registered by the run's hooks (`kedro viz build` validates without them), and a
        run checks the name when it parses its endpoint, before any call.

        Args:
            values: the block's settings.
        """
        from llm_feedback.backends.endpoints import parse_endpoints

        parse_endpoints(
            {
                name: _without_credentials(definition)
                if isinstance(definition, Mapping)
                else definition
                for name, definition in values.items()
            }
        )


def _without_credentials(definition: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in definition.items() if key != "credentials"}
