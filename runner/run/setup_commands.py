"""The setup, list and test commands: build (or adopt) the environments and their kernels for this machine, say what
each can do with its GPU, and run the tests once every environment they use is built.

Setup and list need the standard library only: they run before the runner's own environment exists.
"""

import json
import os
import shutil
import sys
import textwrap

from common import hyperparams, results, tasks
from runner import catalog
from runner.run import browser, compatibility, environments, for_tests, interpreters, locks


def list_catalog():
    """Print the GPU found, frameworks with their variants and environments, tasks, and every environment's state."""
    machine = compatibility.detect()
    print("GPU: " + machine.describe())
    print("Frameworks:")
    for framework in catalog.FRAMEWORKS:
        for variant in framework.variants:
            print("  {:12s} {:20s} env {}".format(framework.key, results.label(framework.label, variant.name),
                                                  variant.env))
    for absent in catalog.ABSENT:
        print("  {:12s} {:20s} {}".format(absent.key, absent.label, textwrap.shorten(absent.reason, 90)))
    print("Tasks: " + ", ".join(tasks.TASKS))
    print("Profiles: " + ", ".join(hyperparams.PROFILES))
    print("Environments (.envs/; `setup ENV --python PATH` adopts an existing interpreter instead):")
    for env in catalog.ENVIRONMENTS.values():
        state = "; ".join(filter(None, [environment_state(env, machine), environments.installation(env).origin()]))
        print("  {:10s} {:8s} {}".format(env.name, "ready" if environments.is_ready(env) else "missing", state))
    releases = catalog.release_environments()
    if releases:
        print("Frameworks at a release (`-f jax@0.6.2`; `prune` removes them):")
    for env in releases:
        print("  {:18s} {:8s} {:.1f} GB on disk; {}".format(
            env.name, "ready" if environments.is_ready(env) else "missing", environments.disk_size(env.path) / 1e9,
            environments.installation(env).describe()))
    return 0


def prune(names=()):
    """Remove the named release environments (all of them by default): their folder under .envs/, its build log and
    its kernel; what they were built from (envs/versions/) stays."""
    chosen = [catalog.environment(name) for name in names] or catalog.release_environments()
    for env in chosen:
        if not env.release:
            print("[prune] {}: kept: only a framework's release environments (jax@0.6.2) are pruned".format(env.name))
            continue
        size = environments.disk_size(env.path)
        for path in (env.path, environments.kernel_spec_path(env).parent):
            shutil.rmtree(str(path), ignore_errors=True)
        for path in (catalog.ENVS_DIR / (env.name + ".log"), catalog.ENVS_DIR / (env.name + ".lock")):
            if path.exists():
                path.unlink()
        print("[prune] {}: removed, {:.1f} GB freed".format(env.name, size / 1e9))
    if not chosen:
        print("[prune] no release environment is built")
    return 0


def environment_state(env, machine):
    """What `env` is and whether its framework can use this machine's GPU, in one line for `list`."""
    variant = compatibility.variant_text(env) or "to build on " + interpreters.plan(env.python, env.python_shared)
    if not machine.gpus or env.framework_module is None:  # nothing to compute on, or nothing that computes
        return variant
    planned = compatibility.plan(env, machine)
    if planned.unavailable:
        return "; ".join(filter(None, [variant, planned.unavailable]))
    if not environments.is_ready(env, planned.requirements):
        return "; ".join(filter(None, [variant, "for this GPU, setup builds envs/{}".format(planned.requirements.name)]))
    answer = (environments.read_stamp(env) or {}).get("probe")
    if not answer:
        return variant + "; GPU: not checked (`setup {}` checks it)".format(env.name)
    if answer.get("gpu_ok"):
        return variant + "; GPU: yes, {} computes on {}".format(answer.get("framework"), ", ".join(answer["gpus"]))
    return variant + "; GPU: no: {}".format(answer.get("error"))


def setup(envs=(), python=None, install_missing=False, wheels=None, build=None):
    """Build the named environments (all by default; `build`: 'gpu' or 'cpu' where forced), or adopt the interpreter
    `python` as the one named; exit 1 if any failed."""
    machine = compatibility.detect()
    print("[gpu] " + machine.describe())
    if python is not None:
        env = catalog.ENVIRONMENTS[envs[0]]
        planned = compatibility.plan(env, machine, build=None)  # an adopted one plans no build: its pins
        requirements = planned.requirements or (
            env.gpu_requirements[0] if machine.gpus and env.gpu_requirements else env.requirements)
        stamp = environments.adopt(env, python, requirements, install_missing=install_missing, wheels=wheels)
        if machine.gpus and env.framework_module:
            report_probe(env, stamp["probe"])
        return 0
    failed, _ = build_environments(list(envs), machine, build=build, wheels=wheels)
    return 1 if failed else 0


def lock(envs=()):
    """Regenerate the locks of the named environments (all by default) and say what changed in each."""
    written = locks.regenerate(list(envs))
    print("[lock] {} lock{} written; `python3 run_all.py setup` rebuilds the environments whose lock changed".format(
        written, "" if written == 1 else "s"))
    return 0


def prepare_release(env, say=print):
    """Before release environment `env` (jax@0.6.2) is built: lock it where its requirements or lock are missing or
    behind its base environment's pins, and say the disk it will take where it is not built yet."""
    if not locks.release_current(env, catalog.framework(env.name).package):
        locks.regenerate([env.name], say=say)
    if not environments.is_ready(env):
        base = catalog.environment(env.base)
        size = environments.disk_size(base.path) if environments.is_ready(base) else None
        say("[setup] {}: a new environment of {}".format(env.name, "about {:.1f} GB, as .envs/{} takes".format(
            size / 1e9, base.name) if size else "unknown size (.envs/{} is not built to go by)".format(base.name)))


def report_probe(env, answer):
    """Print what the probe found: the framework computes on the GPU, or its own first error line."""
    if answer.get("gpu_ok"):
        print("[setup] {}: GPU check: {} {} computes on {}".format(env.name, answer.get("framework"),
                                                                   answer.get("version"), ", ".join(answer["gpus"])))
    else:
        print("[setup] {}: GPU check FAILED: {}".format(env.name, answer.get("error")))


def build_environments(names, machine, build=None, device="auto", wheels=None):
    """Build the named environments (all when empty) for this machine; return ({name: error}, {name: unavailable}).

    An environment with no build that fits the GPU is not built (its rows will say why); a GPU build is
    probed after it is built, and the probe's answer kept in its stamp.
    """
    failed, unavailable = {}, {}
    for name in names or list(catalog.ENVIRONMENTS):
        env = catalog.environment(name)
        if env.release:
            try:
                prepare_release(env)
            except locks.LockError as error:
                print("[setup] {}: FAILED: {}".format(name, error))
                failed[name] = error
                continue
        planned = compatibility.plan(env, machine, device=device, build=build)
        if planned.unavailable:
            print("[setup] {}: not built: {}; with --device cpu its notebooks run on the CPU".format(
                name, planned.unavailable))
            unavailable[name] = planned.unavailable
            continue
        if planned.note:
            print("[setup] {}: using envs/{}, since {}".format(name, planned.requirements.name, planned.note))
        try:
            environments.ensure(env, planned.requirements, wheels=wheels)
        except environments.SetupError as error:
            print("[setup] {}: FAILED: {}".format(name, error))
            failed[name] = error
            continue
        if planned.gpu and machine.gpus and env.framework_module:
            answer = environments.probe(env)
            stamp = environments.read_stamp(env)
            stamp["probe"] = answer
            environments.write_stamp(env, stamp)
            report_probe(env, answer)
            if not answer.get("gpu_ok"):
                unavailable[name] = compatibility.UNAVAILABLE_ON_GPU + (answer.get("error") or "the GPU check failed")
    return failed, unavailable

# pytest-xdist's workers for `run_all.py test`: most tests wait on a notebook's kernel, which keeps about one core
# busy, so two workers fill the 2-core CI machine (tests/conftest.py keeps tests that share runs on one worker)
TEST_WORKERS = ["-n", "2"]


def test(pytest_args=()):
    """Build every environment the tests use, then run pytest (which also runs ruff) in the runner environment, on
    TEST_WORKERS unless the arguments choose (-n, or -p no:xdist).

    Tests keep whatever builds are there (GPU builds run their smoke tests on the GPU) and build CPU ones
    where none is. An environment needing what this machine can never have (a Python no known source has, a
    tool: MachineLacks) does not stop the tests: its smoke tests are skipped with that reason. Any other build
    failure, a package source that did not serve (SourceUnreachable) included, is exit 1 with its reason. What the
    tests would otherwise fetch (wheels, the compatibility environments: runner/run/for_tests.py) is obtained here
    too, so that pytest never uses the network.
    """
    failed, _ = build_environments([], compatibility.detect(), device="cpu")
    lacked = {name: str(error) for name, error in failed.items() if isinstance(error, environments.MachineLacks)}
    os.environ[environments.UNAVAILABLE_VARIABLE] = json.dumps(lacked)
    unbuilt = {name: error for name, error in failed.items() if name not in lacked}
    for name, error in unbuilt.items():
        print("run_all.py: error: environment {} could not be built, and the tests need it: {}".format(name, error),
              file=sys.stderr)
    if unbuilt:
        return 1
    try:
        for_tests.prepare()
    except environments.SetupError as error:
        print("run_all.py: error: what the tests install without an index could not be obtained: {}".format(error),
              file=sys.stderr)
        return 1
    try:
        print("[setup] browser: {}".format(browser.ensure_browser()))
    except environments.SetupError as error:
        print("[setup] browser: {} (the browser test will fail)".format(error))
    os.chdir(str(catalog.REPO))
    sys.stdout.flush()
    pytest_args = [a for a in pytest_args if a != "--"]
    chosen = any(a.startswith(("-n", "--numprocesses", "no:xdist")) for a in pytest_args)  # -n N, -p no:xdist
    pytest_args = pytest_args if chosen else TEST_WORKERS + pytest_args
    os.execv(sys.executable, [sys.executable, "-m", "pytest"] + pytest_args)
