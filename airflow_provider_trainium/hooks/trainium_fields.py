"""The ``trainium`` connection's extras, declared once as JSON Schema.

Airflow (3.2+) builds the connection form from this through provider info (``conn-fields`` and
``ui-field-behaviour``), and :class:`~airflow_provider_trainium.hooks.trainium.TrainiumConfig` validates
a connection's extras against the same schema, so the form and the check cannot drift apart.
Plain data and no imports: provider info is read by every Airflow component.
"""

from __future__ import annotations

from typing import Any

#: The connection every task uses unless it names another. Here, with the connection's fields, rather than in
#: ``hooks.trainium``: operators read it while a DAG file is parsed, which need not load the hook, and provider
#: info has loaded this module already.
DEFAULT_CONN_ID = "trainium_default"

_OPTIONAL_STRING: dict[str, Any] = {"type": ["string", "null"], "minLength": 1}
_ROLE_ARN = r"^arn:aws[a-z-]*:iam::[0-9]+:role/.+$"
#: An ``aws-neuronx-dkms`` version, the templates' AllowedPattern for their driver parameters.
_DRIVER_VERSION = r"^[0-9]+(\.[0-9]+)+$"
_ID_LIST = {"type": ["array", "string", "null"], "items": {"type": "string", "minLength": 1}}
_URI = r"^(s3|file)://.+"


def _list_of(pattern: str) -> dict[str, Any]:
    """Strings matching ``pattern``: a list, or one string separated by commas (``TrainiumConfig`` splits it)."""
    return {"type": ["array", "string", "null"], "items": {"type": "string", "pattern": pattern}}


#: An EC2 Capacity Reservation (or Capacity Block for ML) id; ``neuron.spec`` checks a job's with the same pattern.
CAPACITY_RESERVATION_ID = r"^cr-[0-9a-f]{8,17}$"

#: field -> {label, description, schema}; the format of provider.yaml's ``conn-fields``.
CONN_FIELDS: dict[str, dict[str, Any]] = {
    "aws_conn_id": {
        "label": "AWS connection",
        "description": "Airflow connection id of the AWS credentials every AWS call uses.",
        "schema": {"type": ["string", "null"], "default": "aws_default", "minLength": 1},
    },
    "region_name": {
        "label": "AWS Region",
        "description": "Region of the cluster, queues, bucket and repository; default: the AWS connection's.",
        "schema": {**_OPTIONAL_STRING, "pattern": r"^[a-z]{2}(-[a-z]+)+-[0-9]+$"},
    },
    "artifact_root": {
        "label": "Artifact root",
        "description": "Where runs, models and the compile cache go: s3://bucket/prefix (required for ECS and "
        "Batch) or file:///path (local compute). Default: file://$AIRFLOW_HOME/trainium.",
        "schema": {**_OPTIONAL_STRING, "pattern": _URI},
    },
    "ecs_cluster": {
        "label": "ECS cluster",
        "description": "Name or ARN of the ECS cluster that runs single-node jobs.",
        "schema": _OPTIONAL_STRING,
    },
    "ecs_capacity_provider": {
        "label": "ECS capacity provider",
        "description": "Capacity provider of the Trn1 instances (the cluster's default strategy when empty).",
        "schema": _OPTIONAL_STRING,
    },
    "ecs_execution_role_arn": {
        "label": "ECS execution role ARN",
        "description": "Role ECS uses to pull the image and write logs.",
        "schema": {**_OPTIONAL_STRING, "pattern": _ROLE_ARN},
    },
    "job_role_arn": {
        "label": "Job role ARN",
        "description": "Role the training containers run as (reads data, writes the artifact root).",
        "schema": {**_OPTIONAL_STRING, "pattern": _ROLE_ARN},
    },
    "batch_job_queues": {
        "label": "Batch job queues",
        "description": 'AWS Batch job queue per instance type, e.g. {"trn1.32xlarge": "trainium-trn1-32xl"}.',
        "schema": {
            "type": ["object", "null"],
            "propertyNames": {"pattern": r"^trn[0-9][a-z0-9-]*\.[0-9]*x?large$"},
            "additionalProperties": {"type": "string", "minLength": 1},
        },
    },
    "capacity_reservations": {
        "label": "Capacity reservations",
        "description": "Where the jobs of each capacity reservation go (one CloudFormation stack per reservation): "
        'reservation id -> {"batch_job_queue": name or ARN} for Batch, {"ecs_cluster": ..., '
        '"ecs_capacity_provider": ...} for ECS, e.g. {"cr-0123456789abcdef0": {"batch_job_queue": '
        '"trainium-cb-trn1"}}. A job with capacity_reservation runs there; one this map lacks is refused.',
        "schema": {
            "type": ["object", "null"],
            "propertyNames": {"pattern": CAPACITY_RESERVATION_ID},
            "additionalProperties": {
                "type": "object",
                "minProperties": 1,
                "properties": {
                    "batch_job_queue": {"type": "string", "minLength": 1},
                    "ecs_cluster": {"type": "string", "minLength": 1},
                    "ecs_capacity_provider": {"type": "string", "minLength": 1},
                },
                "additionalProperties": False,
            },
        },
    },
    "subnets": {
        "label": "Subnets",
        "description": "Subnet ids for ECS tasks (a list, or ids separated by commas).",
        "schema": _ID_LIST,
    },
    "security_groups": {
        "label": "Security groups",
        "description": "Security group ids for ECS tasks (a list, or ids separated by commas).",
        "schema": _ID_LIST,
    },
    "ecr_repository": {
        "label": "ECR repository",
        "description": "Repository the image operator pushes the training image to.",
        "schema": _OPTIONAL_STRING,
    },
    "log_group": {
        "label": "CloudWatch log group",
        "description": "Log group of the training containers.",
        "schema": _OPTIONAL_STRING,
    },
    "image": {
        "label": "Training image",
        "description": "Image URI jobs run when a task names none (repository@digest or :tag).",
        "schema": _OPTIONAL_STRING,
    },
    "allowed_input_prefixes": {
        "label": "Allowed input prefixes",
        "description": "Prefixes (s3://bucket/prefix, a list or separated by commas) a run's input_uri and "
        "base_model may read from, besides the artifact root and registry references.",
        "schema": _list_of(_URI),
    },
    "allowed_output_prefixes": {
        "label": "Allowed output prefixes",
        "description": "Prefixes (s3://bucket/prefix or file:///path, a list or separated by commas) a job's "
        "output_uri, checkpoint_uri and code_uri may write under, besides the artifact root. The input prefixes "
        "are not writable unless listed here too.",
        "schema": _list_of(_URI),
    },
    "local_inherited_env": {
        "label": "Local jobs inherit",
        "description": "Variables of the worker's environment a local-compute job keeps besides PATH, HOME, USER, "
        "LOGNAME, LANG, LANGUAGE, LC_*, TMPDIR, TZ and VIRTUAL_ENV: names, or prefixes ending in * (a list or "
        'separated by commas), e.g. ["HF_HOME", "OMP_NUM_THREADS", "XLA_FLAGS"]. Names that load code or '
        "credentials (LD_*, PYTHON*, AWS_*, BASH_ENV, ENV, GCONV_PATH, ...) and the provider's own are refused.",
        "schema": _list_of(r"^[A-Za-z_][A-Za-z0-9_]*\*?$"),
    },
    "prices": {
        "label": "Instance prices",
        "description": 'USD per instance-hour over the built-in on-demand prices, e.g. {"as_of": "2026-11-20", '
        '"trn1.32xlarge": 13.23} or {"trn1.32xlarge": {"usd_per_hour": 13.23, "as_of": "2026-11-20"}}.',
        "schema": {
            "type": ["object", "null"],
            "additionalProperties": {
                "type": ["number", "string", "object"],
                "exclusiveMinimum": 0,
                "properties": {"usd_per_hour": {"type": "number", "exclusiveMinimum": 0}},
            },
        },
    },
    "prices_file": {
        "label": "Prices file",
        "description": "Path of a JSON file of prices in the same format, read on the worker "
        "(default: $TRAINIUM_PRICES_FILE). The connection's own prices win over the file's.",
        "schema": _OPTIONAL_STRING,
    },
    "neuron_driver_version": {
        "label": "Neuron driver version",
        "description": "aws-neuronx-dkms version of the hosts of every instance type that Neuron driver per "
        "instance type does not name (connections written before it existed hold only this). Jobs whose image "
        "runtime the driver rejects are refused before they start; no driver for a job's type: not checked, with a "
        "warning.",
        "schema": {**_OPTIONAL_STRING, "pattern": _DRIVER_VERSION},
    },
    "neuron_driver_versions": {
        "label": "Neuron driver per instance type",
        "description": 'aws-neuronx-dkms version per instance type or family, e.g. {"trn1.32xlarge": "2.26.10.0", '
        '"trn2": "2.31.8.0"}: the XLA and native images need different drivers, so each queue or cluster pins '
        "its own (written by `airflow trainium configure` from the stacks' NeuronDriverVersion and "
        "NativeNeuronDriverVersion outputs). A job is checked against its instance type's entry, else its "
        "family's, else Neuron driver version.",
        "schema": {
            "type": ["object", "null"],
            "propertyNames": {"pattern": r"^trn[0-9][a-z0-9-]*(\.[0-9]*x?large)?$"},
            "additionalProperties": {"type": "string", "pattern": _DRIVER_VERSION},
        },
    },
    "image_builder": {
        "label": "Image builder",
        "description": "How TrainiumImageBuildOperator builds images; empty picks one (auto).",
        "schema": {"type": ["string", "null"], "enum": ["docker", "buildah", "codebuild", None]},
    },
    "mlflow_tracking_uri": {
        "label": "MLflow tracking URI",
        "description": "Tracking server (http://host:5000) every training run is exported to after it succeeds: "
        "params, per-step metrics, cost and final evaluation (needs airflow-provider-trainium[mlflow]). "
        "Empty: no MLflow export.",
        "schema": _OPTIONAL_STRING,
    },
    "mlflow_experiment": {
        "label": "MLflow experiment",
        "description": "Experiment the runs go to, created if missing; default: the DAG id.",
        "schema": _OPTIONAL_STRING,
    },
    "tensorboard_logdir": {
        "label": "TensorBoard log dir",
        "description": "s3://bucket/prefix or file:///path each training run writes a TensorBoard event file "
        "under (<dag_id>/<run>/<task_id>; needs airflow-provider-trainium[tensorboard]). Empty: none.",
        "schema": {**_OPTIONAL_STRING, "pattern": _URI},
    },
}

UI_FIELD_BEHAVIOUR: dict[str, Any] = {
    "hidden-fields": ["host", "schema", "login", "password", "port"],
    "relabeling": {"extra": "Other extras (JSON)"},
    "placeholders": {
        "extra": '{"artifact_root": "s3://bucket/prefix", "batch_job_queues": {"trn1.32xlarge": "..."}}',
    },
}


def extras_schema() -> dict[str, Any]:
    """One JSON Schema for a whole ``extra`` object: the declared fields and nothing else."""
    return {
        "type": "object",
        "properties": {name: field["schema"] for name, field in CONN_FIELDS.items()},
        "additionalProperties": False,
    }
