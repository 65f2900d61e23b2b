"""TrainiumImageBuildOperator: the training image for the current sources, built at most once per content."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_trainium import deprecated_names
from airflow_provider_trainium.hooks.trainium_fields import DEFAULT_CONN_ID
from airflow_provider_trainium.links.ecr import EcrImageLink
from airflow_provider_trainium.links.record import push_record

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_trainium.hooks.trainium import TrainiumConfig
    from airflow_provider_trainium.image.builders.base import Builder
    from airflow_provider_trainium.image.container_registry import ContainerRegistry


class TrainiumImageBuildOperator(BaseOperator):
    """Hash the build context into a tag; if the registry has it, return its digest, else build and push.

    Returns ``repository@sha256:...`` (XCom ``return_value``) and pushes ``tag``, ``digest``, ``built`` and
    ``base_digest``: the manifest digest of the base image the build started from (None when unknown), which a
    registered model's lineage records.
    Training tasks should take the returned reference, so a run is pinned to the exact image even if a tag
    moves. It also pushes ``stack``, the training stack the image carries, and ``labels``, the image's labels as the
    registry holds them (the runtime label says which Neuron release and stack it is; None when unreadable).

    A user's own image (docs/image.md, "Your own image"): ``context_dir`` is the user's folder, its ``Dockerfile``
    starts ``ARG TRAINIUM_BASE_IMAGE`` / ``FROM ${TRAINIUM_BASE_IMAGE}`` and ``base_image`` names the training image
    it builds on. The base is pinned by digest before the build, so the tag (which covers build args) moves with the
    base's digest; the image inherits the launcher ENTRYPOINT and the Neuron labels, and a Dockerfile that would
    replace the ENTRYPOINT, set a CMD or drop the launcher from PYTHONPATH fails before anything is built
    (``image.user_image``). ``stack`` is then what the image's labels say.

    :param context_dir: build context directory. None: the training images' own context, shipped with the
        provider (``deployment_files.image_context``: the wheel's bundled files, or a checkout's root); a user's
        image (``base_image``) names its own folder.
    :param dockerfile: Dockerfile path, relative to ``context_dir``. Default: ``Dockerfile`` with ``base_image``,
        else the image of ``stack`` (``docker/Dockerfile`` for xla, ``docker/native/Dockerfile`` for native;
        ``image.stacks``).
    :param base_image: the training image a user's Dockerfile builds on, passed as build arg
        ``TRAINIUM_BASE_IMAGE`` pinned to ``repository@sha256:...`` (templated): ``"trainium"`` for the trainium
        connection's ``image``, or a reference (``image.output`` of the task that built the training image in this
        run, or ``repository:tag``, whose digest the registry is asked for). None: no base is injected.
    :param stack: the run's training stack (``auto``, ``xla``, ``native``; templated), so that a native run builds
        the native image. ``auto`` resolves for ``instance_type`` as the run's jobs resolve it. None: ``xla``.
    :param instance_type: the run's instance type (templated), for ``auto`` and the release table's family check.
    :param repository: ECR repository name or URI, or ``host[:port]/name`` for another OCI registry.
        Default: ``ecr_repository`` of the trainium connection.
    :param builder: ``auto``, ``docker``, ``buildah``, ``codebuild``, or a Builder instance. ``auto`` uses a
        Docker engine if present, else buildah, else CodeBuild when the trainium connection exists.
    :param builder_options: keyword options for the builder (e.g. buildah ``storage_driver``).
    :param build_args: Dockerfile build args; they are part of the tag.
    :param source_revision: passed as build arg ``SOURCE_REVISION`` (image label); being a build arg, it
        makes the tag per revision. Leave unset to reuse images across commits with identical content.
    :param insecure_registry: plain HTTP for an OCI registry (tests, local mirrors).
    :param codebuild_source_uri: ``s3://`` prefix for context uploads (CodeBuild); default
        ``<artifact_root>/image-contexts``.
    """

    template_fields: Sequence[str] = (
        "context_dir",
        "dockerfile",
        "base_image",
        "stack",
        "instance_type",
        "repository",
        "build_args",
        "source_revision",
        "target",
        "codebuild_source_uri",
    )
    operator_extra_links = (EcrImageLink(),)
    ui_color = "#ff9900"

    def __init__(
        self,
        *,
        context_dir: str | None = None,
        dockerfile: str | None = None,
        base_image: str | None = None,
        stack: str | None = None,
        instance_type: str | None = None,
        repository: str | None = None,
        builder: str | Builder = "auto",
        builder_options: dict[str, Any] | None = None,
        build_args: dict[str, str] | None = None,
        source_revision: str | None = None,
        target: str | None = None,
        tag_prefix: str = "ctx",
        insecure_registry: bool = False,
        trainium_conn_id: str = DEFAULT_CONN_ID,
        aws_conn_id: str | None = None,
        region_name: str | None = None,
        codebuild_project: str | None = None,
        codebuild_service_role_arn: str | None = None,
        codebuild_source_uri: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.context_dir = context_dir
        self.dockerfile = dockerfile
        self.base_image = base_image
        self.stack = stack
        self.instance_type = instance_type
        self.repository = repository
        self.builder = builder
        self.builder_options = builder_options or {}
        self.build_args = build_args or {}
        self.source_revision = source_revision
        self.target = target
        self.tag_prefix = tag_prefix
        self.insecure_registry = insecure_registry
        self.trainium_conn_id = trainium_conn_id
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.codebuild_project = codebuild_project
        self.codebuild_service_role_arn = codebuild_service_role_arn
        self.codebuild_source_uri = codebuild_source_uri

    def _config(self) -> TrainiumConfig:
        from airflow_provider_trainium.hooks.trainium import TrainiumHook

        return TrainiumHook(trainium_conn_id=self.trainium_conn_id).get_config()

    def _registry(self, config: TrainiumConfig, aws_conn_id: str, region: str | None) -> ContainerRegistry:
        from airflow_provider_trainium.image.container_registry import parse_repository
        from airflow_provider_trainium.image.errors import ContainerRegistryError

        repository = self.repository or config.ecr_repository
        if not repository:
            raise ContainerRegistryError(
                "no image repository: pass repository= or set ecr_repository in the trainium connection"
            )
        return parse_repository(
            repository, aws_conn_id=aws_conn_id, region_name=region, insecure=self.insecure_registry
        )

    def _builder(self, config: TrainiumConfig, aws_conn_id: str, region: str | None) -> Builder:
        from airflow_provider_trainium.image.builders import auto_builder_name, make_builder

        if not isinstance(self.builder, str):
            return self.builder
        name = self.builder
        if name == "auto":
            name = config.image_builder or auto_builder_name(config.configured)
        options = dict(self.builder_options)
        if name == "codebuild":
            source = self.codebuild_source_uri
            if not source and config.artifact_root.startswith("s3://"):
                source = config.artifact_root.rstrip("/") + "/image-contexts"
            options.setdefault("aws_conn_id", aws_conn_id)
            options.setdefault("region_name", region)
            options.setdefault("source_uri", source)
            options.setdefault("log_group", config.log_group)
            if self.codebuild_project:
                options.setdefault("project_name", self.codebuild_project)
            if self.codebuild_service_role_arn:
                options.setdefault("service_role_arn", self.codebuild_service_role_arn)
        return make_builder(name, **options)

    def image_stack(self) -> str:
        """The stack the image is built for (``stack`` resolved; ``xla`` without one)."""
        from airflow_provider_trainium.image.stacks import image_stack_for_build

        return image_stack_for_build(self.stack, self.instance_type)

    def dockerfile_path(self, stack: str) -> str:
        """``dockerfile`` when given, else ``Dockerfile`` for a user's image, else the Dockerfile of ``stack``'s."""
        from airflow_provider_trainium.image.stacks import dockerfile_for

        if self.dockerfile:
            return self.dockerfile
        return "Dockerfile" if self.base_image else dockerfile_for(stack)

    def pinned_base(self, config: TrainiumConfig, aws_conn_id: str, region: str | None) -> str:
        """``base_image`` as ``repository@sha256:...`` (``trainium``: the connection's image), asking the
        registry for a tag's digest."""
        from airflow_provider_trainium.image.container_registry import parse_repository
        from airflow_provider_trainium.image.errors import ContextError
        from airflow_provider_trainium.image.user_image import CONFIGURED_IMAGE, pin_reference

        reference = str(self.base_image).strip()
        if reference == CONFIGURED_IMAGE:
            if not config.image:
                raise ContextError(
                    f"base_image={CONFIGURED_IMAGE!r} names the trainium connection's image, and it sets none: set "
                    "`image` there or pass the training image's reference (its build task's output)"
                )
            reference = config.image

        def registry_for(repository: str) -> ContainerRegistry:
            return parse_repository(
                repository, aws_conn_id=aws_conn_id, region_name=region, insecure=self.insecure_registry
            )

        return pin_reference(reference, registry_for)

    def build_context_dir(self) -> str:
        """``context_dir``, or the provider's own training-image context when it is unset."""
        from airflow_provider_trainium.image.errors import ContextError

        if self.context_dir:
            return str(self.context_dir)
        if self.base_image:
            raise ContextError("a user's image needs context_dir: the folder that holds its Dockerfile")
        from airflow_provider_trainium.deployment_files import image_context

        return str(image_context())

    def carried_stack(self, reference: str, labels: dict[str, str] | None, fallback: str) -> str:
        """The stack a user's image carries: its base's, by the labels it inherited (``fallback`` when they are
        unreadable). A ``stack`` that says otherwise is a warning here; the job's own image check refuses it."""
        from airflow_provider_trainium.neuron.releases import image_stack

        carried = (image_stack(reference, labels) if labels is not None else None) or fallback
        if self.stack and carried != fallback:
            self.log.warning(
                "stack=%r, but the base image carries the %s stack: pushing %s", self.stack, carried, carried
            )
        return carried

    def sources(self) -> tuple[Any, str, ContainerRegistry, TrainiumConfig, str, str | None]:
        """The build context (hashed sources, Dockerfile, build args with a user image's base pinned), the image's
        stack and the registry: everything the content-hash tag comes from. Cheap local checks fail first."""
        from airflow_provider_trainium.image.context import BuildContext
        from airflow_provider_trainium.image.errors import ContextError
        from airflow_provider_trainium.image.user_image import BASE_ARG, check_starts_from, check_user_dockerfile

        build_args = {str(k): str(v) for k, v in self.build_args.items()}
        if self.source_revision:
            build_args["SOURCE_REVISION"] = str(self.source_revision)
        user_image = bool(self.base_image)
        if user_image and BASE_ARG in build_args:
            raise ContextError(f"set base_image or build_args[{BASE_ARG!r}], not both: base_image pins it by digest")
        # Cheap local checks first: a bad stack or context fails before any AWS call or build.
        stack = self.image_stack()
        context_dir = self.build_context_dir()
        build_context = BuildContext.load(context_dir, self.dockerfile_path(stack), build_args, self.target)
        text = ""
        if user_image:
            text = (build_context.root / build_context.dockerfile).read_text(encoding="utf-8")
            check_user_dockerfile(text, build_context.dockerfile, self.target)
        config = self._config()
        aws_conn_id = self.aws_conn_id or config.aws_conn_id
        region = self.region_name or config.region_name
        if user_image:
            base = self.pinned_base(config, aws_conn_id, region)
            build_args[BASE_ARG] = base
            check_starts_from(text, build_context.dockerfile, build_args, self.target, base)
            # hashed again with the pinned base among the build args: a new base digest is a new tag
            build_context = BuildContext.load(context_dir, build_context.dockerfile, build_args, self.target)
            self.log.info("user image from %s (build arg %s)", base, BASE_ARG)
        registry = self._registry(config, aws_conn_id, region)
        return build_context, stack, registry, config, aws_conn_id, region

    def derived_image(self) -> tuple[str, str | None, dict[str, str] | None]:
        """The image this task builds for the current sources, re-derived (never read from its XCom): the
        registry's ``repository@sha256:...`` under the content-hash tag, its base digest and its labels.
        LookupError when the registry holds no image under that tag. Call it on a task rendered for the run."""
        from airflow_provider_trainium.image.builders.base import BASE_DIGEST_LABEL

        build_context, _, registry, *_ = self.sources()
        tag = build_context.tag(self.tag_prefix)
        digest = registry.lookup(tag)
        if not digest:
            raise LookupError(f"the registry holds no image {registry.repository}:{tag} for this run's sources")
        labels = registry.labels(tag)
        return f"{registry.repository}@{digest}", (labels or {}).get(BASE_DIGEST_LABEL), labels

    def pre_execute(self, context: Any) -> None:
        """Push the link record before anything can fail, so the link Airflow computes never misses it."""
        push_record(context)
        super().pre_execute(context)

    def execute(self, context: Context) -> str:
        from airflow_provider_trainium.image.container_registry import EcrRegistry
        from airflow_provider_trainium.image.ensure import ensure_image

        build_context, stack, registry, config, aws_conn_id, region = self.sources()
        builder = self._builder(config, aws_conn_id, region)
        result = ensure_image(build_context, registry, builder, tag_prefix=self.tag_prefix)
        labels = registry.labels(result.tag)
        if self.base_image:
            stack = self.carried_stack(result.reference, labels, stack)

        ti = context["ti"]
        ti.xcom_push(key="tag", value=result.tag)
        ti.xcom_push(key="digest", value=result.digest)
        ti.xcom_push(key="built", value=result.built)
        ti.xcom_push(key="base_digest", value=result.base_digest)
        ti.xcom_push(key="stack", value=stack)
        ti.xcom_push(key="labels", value=labels)
        if isinstance(registry, EcrRegistry):
            hook = registry.hook
            EcrImageLink.persist(
                context=context,
                operator=self,
                region_name=hook.conn_region_name,
                partition=hook.conn_partition,
                registry_id=registry.registry_id,
                repository_name=registry.name,
                digest=result.digest,
            )
        self.log.info(
            "image %s (%s stack, %s, tag %s, %s in %.1f s), base image digest %s",
            result.reference,
            stack,
            build_context.dockerfile,
            result.tag,
            "built" if result.built else "already present",
            result.seconds,
            result.base_digest or "unknown",
        )
        return result.reference


def __getattr__(name: str) -> Any:
    """The former class names (:mod:`airflow_provider_trainium.deprecated_names`)."""
    return deprecated_names.resolve(__name__, name)
