"""EC2 vCPU quotas in the moto server of this test process.

moto's Service Quotas answers for the ``vpc`` service only (``moto/servicequotas/models.py``: any other service
is ``NoSuchResourceException``). AWS answers for ``ec2`` as well; this adds the quotas a test sets, in the shape
GetServiceQuota returns (the AWS CLI reference's ``get-service-quota`` example: ``QuotaName``, ``Value``,
``UsageMetric`` naming the AWS/Usage ``ResourceCount`` metric of the quota's class). The server runs in this
process, so its backend is extended here; the clients still reach it over HTTP through an Airflow connection.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_trainium.compute.capacity import TRN_ON_DEMAND_QUOTA

#: The usage metric of the Trn class, as Service Quotas names it for the standard class (``Standard/OnDemand``).
TRN_USAGE_DIMENSIONS = {"Class": "Trn/OnDemand", "Resource": "vCPU", "Service": "EC2", "Type": "Resource"}


def trn_quota(value: float, usage_dimensions: dict[str, str] = TRN_USAGE_DIMENSIONS) -> dict[str, Any]:
    """The quota as GetServiceQuota returns it; a test that reports usage names its own ``usage_dimensions``, so
    the points it puts (CloudWatch keeps them) are read by no other test's quota."""
    service, code = TRN_ON_DEMAND_QUOTA
    return {
        "ServiceCode": service,
        "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
        "QuotaArn": f"arn:aws:servicequotas:us-east-1::{service}/{code}",
        "QuotaCode": code,
        "QuotaName": "Running On-Demand Trn instances",
        "Value": float(value),
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": False,
        "UsageMetric": {
            "MetricNamespace": "AWS/Usage",
            "MetricName": "ResourceCount",
            "MetricDimensions": dict(usage_dimensions),
            "MetricStatisticRecommendation": "Maximum",
        },
    }


def set_ec2_quotas(monkeypatch: pytest.MonkeyPatch, *quotas: dict[str, Any]) -> None:
    """Make moto's Service Quotas answer for ``quotas`` (applied and default alike) until the test ends."""
    from moto.servicequotas.exceptions import NoSuchResource
    from moto.servicequotas.models import ServiceQuotasBackend

    by_code = {q["QuotaCode"]: q for q in quotas}
    default_list = ServiceQuotasBackend.list_aws_default_service_quotas
    default_get = ServiceQuotasBackend.get_service_quota

    def list_defaults(self: Any, service_code: str) -> list[dict[str, Any]]:
        if service_code == "ec2":
            return list(by_code.values())
        return default_list(self, service_code)

    def get(self: Any, service_code: str, quota_code: str) -> dict[str, Any]:
        if service_code == "ec2":
            if quota_code in by_code:
                return by_code[quota_code]
            raise NoSuchResource
        return default_get(self, service_code, quota_code)

    monkeypatch.setattr(ServiceQuotasBackend, "list_aws_default_service_quotas", list_defaults)
    monkeypatch.setattr(ServiceQuotasBackend, "get_service_quota", get)


def put_trn_usage(cloudwatch: Any, vcpus: float, dimensions: dict[str, str] = TRN_USAGE_DIMENSIONS) -> None:
    """What AWS/Usage reports while ``vcpus`` of On-Demand Trn instances run."""
    cloudwatch.put_metric_data(
        Namespace="AWS/Usage",
        MetricData=[{
            "MetricName": "ResourceCount",
            "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()],
            "Value": float(vcpus),
            "Unit": "None",
        }],
    )  # fmt: skip
