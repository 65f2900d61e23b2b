"""The ``stack`` values a DAG or an operator may say: ``auto`` (the instance family chooses) or a training stack
(``trainium_trainer.boundary.STACKS``).

Kept apart from the release table (:mod:`airflow_provider_trainium.neuron.releases`, which decides what ``auto``
means and which stack trains where) so that a DAG file's ``stack`` param reads its choices without loading it.
"""

from __future__ import annotations

from trainium_trainer import boundary

#: The DAGs' and the operator's ``stack`` value that lets the instance family choose.
STACK_AUTO = "auto"
STACK_CHOICES: tuple[str, ...] = (STACK_AUTO, *boundary.STACKS)
