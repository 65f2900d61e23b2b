"""One error hierarchy per package: the model registry's and the image pipeline's never share a name."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import airflow_provider_trainium
from airflow_provider_trainium import image, registry
from airflow_provider_trainium.image import errors as image_errors
from airflow_provider_trainium.registry import errors as registry_errors


def _errors(module) -> list[type[BaseException]]:
    return [c for _, c in inspect.getmembers(module, inspect.isclass) if issubclass(c, BaseException)]


def test_each_package_has_one_base_error() -> None:
    assert all(issubclass(c, registry.RegistryError) for c in _errors(registry_errors))
    assert all(issubclass(c, image.ImageError) for c in _errors(image_errors))
    assert issubclass(registry.InvalidNameError, ValueError)
    assert issubclass(image.ContainerRegistryUnreachable, image.ContainerRegistryError)


def test_no_error_class_name_is_defined_twice_in_the_provider() -> None:
    seen: dict[str, str] = {}
    for info in pkgutil.walk_packages(airflow_provider_trainium.__path__, "airflow_provider_trainium."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for cls in _errors(module):
            if cls.__module__ != info.name:
                continue
            assert cls.__name__ not in seen, f"{cls.__name__} in {info.name} and {seen[cls.__name__]}"
            seen[cls.__name__] = info.name
