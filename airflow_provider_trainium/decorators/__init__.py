"""TaskFlow decorators: ``@task.trainium`` (registered through the provider's ``task-decorators``)."""
