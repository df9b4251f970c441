"""The Kubernetes runner kit in runner/arc/ holds up without a cluster.

`runner/arc/values.yaml` is checked against the `gha-runner-scale-set` chart's own values file (a
verbatim copy in tests/fixtures/arc/), and the pods built from it are validated against the
Kubernetes schemas that `kubernetes-validate` ships, strictly (an unknown field is an error). The
builders below mirror the code they stand for, so that the pods are the ones a cluster would see:

- the runner pod: the chart's `templates/autoscalingrunnerset.yaml` and its helpers
  `kubernetes-mode-runner-container` and `kubernetes-mode-work-volume` (chart 0.14.2);
- the job pod and a container action's Job: runner-container-hooks v0.7.0 (`createPod`,
  `createJob`, `createContainerSpec`, `mergeContainerWithOptions`, `mergePodSpecWithOptions`,
  `mergeObjectMeta`), the hook the runner image runs in kubernetes mode (/home/runner/k8s; the
  image's Dockerfile sets RUNNER_CONTAINER_HOOKS_VERSION=0.7.0).
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from helpers.paths import ROOT

VALUES = ROOT / "runner" / "arc" / "values.yaml"
HOOK_TEMPLATE = ROOT / "runner" / "arc" / "hook-template.yaml"
CHART_VALUES = ROOT / "tests" / "fixtures" / "arc" / "values.yaml"
WORKFLOW = ROOT / "examples" / "workflows" / "repro-gate-arc.yml"
DOC = ROOT / "docs" / "runner-kubernetes.md"

# The oldest Kubernetes minor the kubernetes-validate release ships schemas for and upstream
# still patched when this was written; the objects use nothing newer.
KUBERNETES = "1.33"

Manifest = dict[str, Any]
KeyPath = tuple[str, ...]

# Keys under which the chart takes a whole Kubernetes object, not keys of its own: the runner
# pod's PodSpec ("template is the PodSpec for each runner Pod") and the work volume's
# PersistentVolumeClaimSpec (rendered with toYaml into volumeClaimTemplate.spec). Their
# content is checked by validating the rendered runner pod.
FREE_FORM: frozenset[KeyPath] = frozenset({
    ("template", "spec"),
    ("containerMode", "kubernetesModeWorkVolumeClaim"),
})

# A key line of the chart's values file, set or shown commented out (`# maxRunners: 5`). Prose
# comments start with `##`, comments inside a commented example with `#   #`: neither matches.
KEY_LINE = re.compile(r"^(?P<lead> *)(?:# )?(?P<inner> *)(?P<key>[A-Za-z_][\w.-]*):(?:\s|$)")

RUNNER_IMAGE = re.compile(r"^ghcr\.io/actions/actions-runner:\d+\.\d+\.\d+@sha256:[0-9a-f]{64}$")
PINNED_IMAGE = re.compile(r"^[\w.-]+(?::\d+)?/[\w./-]+@sha256:[0-9a-f]{64}$")
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

# What a cluster would name things; any valid names do.
RUNNER_POD = "repro-gate-gpu-x7k2p-runner-abcde"
NODE = "gpu-node-1"
WORKSPACE = "/__w/train/train"
ACTION_IMAGE = "ghcr.io/example-org/repro-gate@sha256:" + "1" * 64


def load(path: Path) -> Manifest:
    return yaml.safe_load(path.read_text())


def validate(resource: Manifest) -> None:
    """Raises kubernetes_validate's ValidationError for anything the API server would refuse."""
    kubernetes_validate.validate(resource, KUBERNETES, strict=True)


def documented_paths(text: str) -> set[KeyPath]:
    """Every key path the chart's values file sets or documents in a commented-out example."""
    paths: set[KeyPath] = set()
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        match = KEY_LINE.match(line)
        if match is None:
            continue
        column = len(match["lead"]) + len(match["inner"])
        while stack and stack[-1][0] >= column:
            stack.pop()
        stack.append((column, match["key"]))
        paths.add(tuple(key for _, key in stack))
    return paths


def value_paths(values: Manifest, prefix: KeyPath = ()) -> Iterator[KeyPath]:
    """The mapping key paths of a values file, down to the free-form objects."""
    for key, value in values.items():
        path = (*prefix, key)
        yield path
        if isinstance(value, dict) and path not in FREE_FORM:
            yield from value_paths(value, path)


def undocumented(values: Manifest, documented: set[KeyPath]) -> list[KeyPath]:
    def known(path: KeyPath) -> bool:
        free = any(path[: len(prefix)] == prefix for prefix in FREE_FORM)
        return path in documented or free
    return [path for path in value_paths(values) if not known(path)]


def runner_container(values: Manifest) -> Manifest:
    return next(c for c in values["template"]["spec"]["containers"] if c["name"] == "runner")


def runner_pod(values: Manifest) -> Manifest:
    """The runner pod the chart renders in containerMode kubernetes."""
    given = values["template"]["spec"]
    runner = runner_container(values)
    env = list(runner.get("env", []))
    defaults = [
        {"name": "ACTIONS_RUNNER_CONTAINER_HOOKS", "value": "/home/runner/k8s/index.js"},
        {"name": "ACTIONS_RUNNER_POD_NAME",
         "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER", "value": "true"},
    ]
    env += [d for d in defaults if d["name"] not in {e["name"] for e in env}]
    mounts = list(runner.get("volumeMounts", []))
    if not any(m["name"] == "work" for m in mounts):
        mounts.append({"name": "work", "mountPath": "/home/runner/_work"})
    container = {**runner, "env": env, "volumeMounts": mounts}
    volumes = [v for v in given.get("volumes", []) if v["name"] == "work"] or [
        {"name": "work", "ephemeral": {"volumeClaimTemplate": {
            "spec": values["containerMode"]["kubernetesModeWorkVolumeClaim"]}}}]
    volumes += [v for v in given.get("volumes", []) if v["name"] != "work"]
    reserved = {"containers", "volumes", "initContainers", "serviceAccountName"}
    spec = {key: value for key, value in given.items() if key not in reserved}
    spec.setdefault("restartPolicy", "Never")
    spec["serviceAccountName"] = given.get(
        "serviceAccountName", f"{values['runnerScaleSetName']}-gha-rs-kube-mode")
    spec["containers"] = [container, *(c for c in given["containers"] if c["name"] != "runner")]
    spec["volumes"] = volumes
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": RUNNER_POD}, "spec": spec}


def hook_extension(configmap: Manifest) -> Manifest:
    (text,) = configmap["data"].values()
    return yaml.safe_load(text)


def merge_container(base: Manifest, extension: Manifest) -> None:
    """mergeContainerWithOptions: name and image ignored, lists appended, the rest set."""
    for key, value in extension.items():
        if key in ("name", "image"):
            continue
        if key in ("env", "volumeMounts", "ports") and value:
            base[key] = [*base.get(key, []), *value]
        else:
            base[key] = value


def merge_pod(pod_metadata: Manifest, spec: Manifest, extension: Manifest) -> None:
    """mergeObjectMeta and mergePodSpecWithOptions."""
    for field in ("labels", "annotations"):
        pod_metadata[field].update(extension.get("metadata", {}).get(field) or {})
    for key, value in extension.get("spec", {}).items():
        if key == "containers":
            spec["containers"] += [c for c in value if not c["name"].startswith("$")]
        elif key == "volumes" and value:
            spec["volumes"] = [*spec["volumes"], *value]
        else:
            spec[key] = value


def extended(container: Manifest, extension: Manifest) -> Manifest:
    own = next((c for c in extension.get("spec", {}).get("containers", [])
                if c["name"] == "$job"), None)
    if own is not None:
        merge_container(container, copy.deepcopy(own))
    return container


def job_pod(extension: Manifest, image: str) -> Manifest:
    """The pod the hook's prepare_job creates for the workflow's `container:`."""
    mounts = [{"name": "work", "mountPath": "/__w"}] + [
        {"name": "work", "mountPath": path, "subPath": sub} for path, sub in (
            ("/__e", "externals"), ("/github/home", "_temp/_github_home"),
            ("/github/workflow", "_temp/_github_workflow"))]
    container = extended({
        "name": "job", "image": image, "ports": [], "workingDir": WORKSPACE,
        "command": ["tail"], "args": ["-f", "/dev/null"],
        "env": [{"name": "GITHUB_ACTIONS", "value": "true"}, {"name": "CI", "value": "true"}],
        "volumeMounts": mounts,
    }, extension)
    metadata = {"name": f"{RUNNER_POD}-workflow", "labels": {"runner-pod": RUNNER_POD},
                "annotations": {}}
    spec = {"containers": [container], "restartPolicy": "Never", "nodeName": NODE,
            "volumes": [{"name": "work",
                         "persistentVolumeClaim": {"claimName": f"{RUNNER_POD}-work"}}]}
    merge_pod(metadata, spec, copy.deepcopy(extension))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def container_step_job(extension: Manifest, image: str) -> Manifest:
    """The Job the hook's run_container_step creates for a `docker://` action."""
    mounts = [{"name": "work", "mountPath": "/__w"}] + [
        {"name": "work", "mountPath": path, "subPath": sub} for path, sub in (
            ("/github/workspace", "train/train"),
            ("/github/file_commands", "_temp/_runner_file_commands"),
            ("/github/home", "_temp/_github_home"), ("/github/workflow", "_temp/_github_workflow"))]
    container = extended({
        "name": "job", "image": image, "workingDir": "/github/workspace",
        "command": ["repro-gate"], "args": ["action"],
        "envFrom": [{"secretRef": {"name": f"{RUNNER_POD}-secret-1a2b3c4d", "optional": False}}],
        "volumeMounts": mounts,
    }, extension)
    name = f"{RUNNER_POD}-step-1a2b3c4d"
    job_metadata = {"name": name, "labels": {"runner-pod": RUNNER_POD}, "annotations": {}}
    pod_metadata: Manifest = {"labels": {}, "annotations": {}}
    spec = {"containers": [container], "restartPolicy": "Never", "nodeName": NODE,
            "volumes": [{"name": "work",
                         "persistentVolumeClaim": {"claimName": f"{RUNNER_POD}-work"}}]}
    merge_pod(job_metadata, {}, {"metadata": extension.get("metadata", {})})
    merge_pod(pod_metadata, spec, copy.deepcopy(extension))
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_metadata,
            "spec": {"ttlSecondsAfterFinished": 300, "backoffLimit": 0,
                     "template": {"metadata": pod_metadata, "spec": spec}}}


def gpu_limit(container: Manifest) -> object:
    return container.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")


def test_chart_values_are_the_recorded_verbatim_copy() -> None:
    recorded = re.search(r"sha256 of the copy \| `([0-9a-f]{64})`",
                         (CHART_VALUES.parent / "README.md").read_text())

    assert recorded is not None
    assert hashlib.sha256(CHART_VALUES.read_bytes()).hexdigest() == recorded[1]


def test_every_key_is_one_the_chart_documents() -> None:
    documented = documented_paths(CHART_VALUES.read_text())

    assert undocumented(load(VALUES), documented) == []


def test_a_misspelt_key_is_caught() -> None:
    """The key check itself: a key the chart does not know is reported, free-form ones are not."""
    values = load(VALUES)
    values["maxRunner"] = 4
    values["containerMode"]["kubernetesModeWorkVolumeClaims"] = {}
    values["template"]["spec"]["priorityClassName"] = "gpu"

    found = undocumented(values, documented_paths(CHART_VALUES.read_text()))

    assert set(found) == {("maxRunner",), ("containerMode", "kubernetesModeWorkVolumeClaims")}


def test_values_name_the_scale_set_and_keep_secrets_out() -> None:
    values = load(VALUES)

    assert values["runnerScaleSetName"] == "repro-gate-gpu"
    assert len(values["runnerScaleSetName"]) <= 45  # the chart fails longer names
    assert values["githubConfigUrl"].startswith("https://github.com/")
    # A string is the name of a pre-defined Secret; a mapping would hold the credentials here.
    assert isinstance(values["githubConfigSecret"], str) and values["githubConfigSecret"]
    assert "github_token" not in VALUES.read_text()
    assert "PRIVATE KEY" not in VALUES.read_text()
    assert isinstance(values["minRunners"], int) and isinstance(values["maxRunners"], int)
    assert 0 <= values["minRunners"] <= values["maxRunners"]
    assert values["containerMode"]["type"] == "kubernetes"
    assert values["containerMode"]["kubernetesModeWorkVolumeClaim"]["accessModes"] == [
        "ReadWriteOnce"]


def test_runner_pod_is_valid_pinned_and_takes_no_gpu() -> None:
    values = load(VALUES)
    pod = runner_pod(values)

    validate(pod)
    (runner, *sidecars) = pod["spec"]["containers"]
    assert sidecars == []
    assert RUNNER_IMAGE.match(runner["image"]), runner["image"]
    tag = runner["image"].split("@")[0]
    assert f"imagetools inspect {tag}" in DOC.read_text()  # how to get the real digest
    assert gpu_limit(runner) is None
    assert "nvidia.com/gpu" not in runner.get("resources", {}).get("requests", {})
    # The hook pins the job pod to this pod's node, so this pod must start on a GPU node.
    assert pod["spec"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert GPU_TOLERATION in pod["spec"]["tolerations"]
    work = next(v for v in pod["spec"]["volumes"] if v["name"] == "work")
    assert work["ephemeral"]["volumeClaimTemplate"]["spec"]["resources"]["requests"]["storage"]


def test_runner_pod_points_the_hook_at_the_mounted_template() -> None:
    pod = runner_pod(load(VALUES))
    configmap = load(HOOK_TEMPLATE)
    runner = pod["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in runner["env"]}
    volume = next(v for v in pod["spec"]["volumes"]
                  if v.get("configMap", {}).get("name") == configmap["metadata"]["name"])
    mount = next(m for m in runner["volumeMounts"] if m["name"] == volume["name"])
    (key,) = configmap["data"]

    assert env["ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE"] == f"{mount['mountPath']}/{key}"
    assert env["ACTIONS_RUNNER_CONTAINER_HOOKS"] == "/home/runner/k8s/index.js"
    assert env["ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER"] == "true"


def test_hook_template_is_a_valid_configmap_holding_a_pod_template() -> None:
    configmap = load(HOOK_TEMPLATE)
    extension = hook_extension(configmap)

    validate(configmap)
    assert set(extension) <= {"metadata", "spec"}
    validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "hook"},
              "template": extension})
    # Either would replace the hook's own pin of the job pod to the runner's node.
    assert not {"nodeName", "affinity"} & set(extension["spec"])


def test_job_pod_merged_by_the_hook_is_valid_and_gets_one_gpu() -> None:
    image = load(WORKFLOW)["jobs"]["gate"]["container"]["image"]
    pod = job_pod(hook_extension(load(HOOK_TEMPLATE)), image)

    validate(pod)
    (job,) = pod["spec"]["containers"]
    assert job["name"] == "job" and job["image"] == image
    assert gpu_limit(job) == 1
    assert pod["spec"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert GPU_TOLERATION in pod["spec"]["tolerations"]
    assert pod["spec"]["nodeName"] == NODE  # still on the runner's node, next to its volume
    assert pod["metadata"]["labels"]["runner-pod"] == RUNNER_POD
    assert pod["metadata"]["labels"]["app.kubernetes.io/part-of"] == "repro-gate"
    assert {"name": "CI", "value": "true"} in job["env"]  # the hook's own, kept


def test_a_container_action_runs_as_a_valid_job_that_also_takes_a_gpu() -> None:
    """docs/runner-kubernetes.md: a `docker://` action step holds a second GPU of the node."""
    job = container_step_job(hook_extension(load(HOOK_TEMPLATE)), ACTION_IMAGE)

    validate(job)
    pod = job["spec"]["template"]
    (step,) = pod["spec"]["containers"]
    assert gpu_limit(step) == 1
    assert pod["spec"]["nodeName"] == NODE
    assert job["metadata"]["labels"]["app.kubernetes.io/part-of"] == "repro-gate"


def test_validation_refuses_a_misspelt_template() -> None:
    """The schema check itself: strict validation refuses a field Kubernetes does not know."""
    extension = hook_extension(load(HOOK_TEMPLATE))
    job = extension["spec"]["containers"][0]
    job["resource"] = job.pop("resources")

    with pytest.raises(kubernetes_validate.ValidationError, match="resource"):
        validate(job_pod(extension, ACTION_IMAGE))


def test_example_workflow_runs_the_gate_in_the_training_container() -> None:
    workflow = load(WORKFLOW)
    (job,) = workflow["jobs"].values()
    runs = [step["run"] for step in job["steps"] if "run" in step]
    uses = [step["uses"] for step in job["steps"] if "uses" in step]

    assert job["runs-on"] == load(VALUES)["runnerScaleSetName"]
    assert PINNED_IMAGE.match(job["container"]["image"]), job["container"]["image"]
    assert "options" not in job["container"]  # not supported by the kubernetes hook
    assert "services" not in job
    assert any("pip install" in run and "repro-gate" in run for run in runs)
    assert any(run.startswith("repro-gate check") for run in runs)
    # No Dockerfile action: the hook cannot build one.
    assert not any(use.startswith("example-org/repro-gate@") for use in uses)
    upload = next(s for s in job["steps"] if s.get("uses", "").startswith(
        "actions/upload-artifact@"))
    assert upload["with"]["path"].rstrip("/") == "repro-gate-out"
    assert upload["if"] == "always()"


def host_reach(pod: Manifest) -> list[str]:
    """What in a pod reaches past it onto the node: privileged or escalating containers, host
    namespaces, host paths."""
    spec = pod["spec"]
    found = [key for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key)]
    found += [v["name"] for v in spec.get("volumes", []) if "hostPath" in v]
    for container in spec["containers"]:
        context = container.get("securityContext", {})
        if context.get("privileged") or context.get("allowPrivilegeEscalation", True):
            found.append(container["name"])
    return found


def test_jobs_are_kept_apart_by_their_pods_without_docker_or_privilege() -> None:
    """docs/runner-kubernetes.md#isolation-there: kubernetes mode, not dind; no Docker socket
    and nothing of the node in the runner pod; the job pod cannot escalate."""
    values = load(VALUES)
    assert values["containerMode"]["type"] == "kubernetes"
    runner = runner_pod(values)
    assert [v for v in runner["spec"]["volumes"] if "hostPath" in v] == []
    assert not any("docker" in str(m) for c in runner["spec"]["containers"]
                   for m in c.get("volumeMounts", []))
    assert [key for key in ("hostNetwork", "hostPID", "hostIPC") if runner["spec"].get(key)] == []

    image = load(WORKFLOW)["jobs"]["gate"]["container"]["image"]
    assert host_reach(job_pod(hook_extension(load(HOOK_TEMPLATE)), image)) == []
    assert "\n## Isolation there\n" in DOC.read_text(encoding="utf-8")
