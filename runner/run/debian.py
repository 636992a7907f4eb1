"""Libraries a framework's kernel loads that its pip packages lack: links under the names it was linked with, Debian
packages fetched with apt-get download (from another Debian suite through a private apt configuration, checked against
Debian's keys) and extracted into the environment, and stand-ins compiled from envs/<name>.c. Nothing is installed
into the system."""

import os
import shutil
import subprocess
from pathlib import Path

from runner import catalog
from runner.run import build_steps
from runner.run.build_steps import MachineLacks, SetupError, SourceUnreachable

LIBRARY_ALIASES_DIR = "library-aliases"  # in the environment: links named as the framework wants them, and stand-ins


DEBIAN_DIR = "debian"  # in the environment: the Debian packages of envs/<name>-debian.txt, extracted


DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"  # Debian's signing keys, for another suite's lists


def needs_libraries(env):
    """True when `env`'s kernel loads libraries the setup provides: aliases, Debian packages or stand-ins."""
    return bool(env.library_aliases or env.debian_packages or env.stand_in_libraries)


def library_folders(env):
    """The folders the kernel of `env` loads shared libraries from, before the system's."""
    folders = [env.path / LIBRARY_ALIASES_DIR]
    folders += sorted(env.path.glob(DEBIAN_DIR + "/usr/lib/*-linux-gnu")) + sorted(env.path.glob(DEBIAN_DIR + "/lib/*-linux-gnu"))
    return folders


def system_library(name):
    """Where the system has shared library `name`: in a folder of LD_LIBRARY_PATH, else in the loader's cache
    (`ldconfig -p`); None where it has none."""
    for folder in filter(None, os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)):
        if os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        if line.strip().startswith(name + " ") and "=>" in line and "x86-64" in line:
            return line.split("=>")[-1].strip()
    return None


def debian_packages(listing):
    """The name=version lines of a listing of Debian packages (envs/<name>-debian.txt), comments left out."""
    lines = (line.split("#")[0].strip() for line in Path(listing).read_text().splitlines())
    return [line for line in lines if line]


def debian_suite(listing):
    """(suite, [mirrors]) from the `# debian-suite:` and `# debian-mirror:` lines of a listing, for packages of
    another Debian release than the system's; None where it names none (the system's apt serves)."""
    found = {"suite": [], "mirror": []}
    for line in Path(listing).read_text().splitlines():
        key, _, value = line.lstrip("# ").partition(":")
        if line.startswith("#") and key in ("debian-suite", "debian-mirror"):
            found[key[len("debian-"):]].append(value.strip())
    if not found["suite"]:
        return None
    return found["suite"][0], found["mirror"] or ["http://deb.debian.org/debian"]


def private_apt(work, suite, mirror):
    """apt-get options that read `suite`'s package lists from `mirror` and keep them, and everything apt writes,
    in the folder `work`/apt: the system's sources, lists and installed packages are neither read nor changed, and
    no root is needed."""
    root = Path(work) / "apt"
    for folder in ("lists/partial", "archives/partial", "preferences.d"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "sources.list").write_text("deb [signed-by={}] {} {} main\n".format(DEBIAN_KEYRING, mirror, suite))
    (root / "status").touch()
    options = {"Dir::Etc::SourceList": root / "sources.list", "Dir::Etc::SourceParts": root / "preferences.d",
               "Dir::Etc::Preferences": root / "preferences", "Dir::Etc::PreferencesParts": root / "preferences.d",
               "Dir::State": root, "Dir::State::Lists": root / "lists", "Dir::State::status": root / "status",
               "Dir::Cache": root, "Dir::Cache::Archives": root / "archives", "APT::Architecture": "amd64"}
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        options["APT::Sandbox::User"] = "root"  # the _apt user could not write into the environment's folder
    return [word for name, value in options.items() for word in ("-o", "{}={}".format(name, value))]


def download_debian_packages(listing, work, downloads, log, name, say, heartbeat):
    """Fetch the pinned packages of `listing` into `downloads` with apt-get download, for environment or interpreter
    `name`: from the system's apt, or from the suite its `# debian-suite:` line names, trying its mirrors in turn
    (their package lists kept in `work`/apt meanwhile)."""
    suite = debian_suite(listing)
    command = ["apt-get", "download"] + debian_packages(listing)
    if suite is None:
        try:
            build_steps.run_logged(command, log, name, say, heartbeat, cwd=str(downloads))
        except SetupError as error:
            if not (hasattr(os, "geteuid") and os.geteuid() == 0):
                raise SetupError("`apt-get download` of {} failed (see {}); install OpenMPI 4 (Debian/Ubuntu: "
                                 "libopenmpi3) and rerun the setup".format(Path(listing).name, log.name)) from error
            build_steps.run_logged(["apt-get", "update"], log, name, say, heartbeat)  # a fresh machine may have no package lists
            build_steps.run_logged(command, log, name, say, heartbeat, cwd=str(downloads))
        return
    suite_name, mirrors = suite
    if not os.path.exists(DEBIAN_KEYRING):
        raise MachineLacks("needs Debian's archive keyring {} (package debian-archive-keyring) to check {}'s "
                           "packages".format(DEBIAN_KEYRING, suite_name))
    failures = []
    for mirror in mirrors:
        apt = private_apt(work, suite_name, mirror)
        try:
            build_steps.run_logged(["apt-get"] + apt + ["update"], log, name, say, heartbeat)
            build_steps.run_logged(["apt-get"] + apt + command[1:], log, name, say, heartbeat, cwd=str(downloads))
            break
        except SetupError:
            failures.append(mirror)
            say("[setup] {}: Debian {} not available from {}".format(name, suite_name, mirror))
        finally:
            shutil.rmtree(str(Path(work) / "apt"), ignore_errors=True)  # the suite's package lists: tens of MB
    else:
        raise SourceUnreachable("needs Debian's {} packages, which none of {} served (see {})".format(
            suite_name, ", ".join(failures), log.name))


def extract_debian_packages(listing, target, work, log, name, say, heartbeat):
    """Download the pinned packages of `listing` (download_debian_packages) and extract each into `target` with
    dpkg -x: their files under `target`/usr, `target`/lib..., nothing installed."""
    if not (shutil.which("apt-get") and shutil.which("dpkg")):
        raise MachineLacks("needs apt-get and dpkg to fetch the Debian packages of {}".format(Path(listing).name))
    downloads = Path(work) / "debian-downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    os.chmod(str(downloads), 0o777)  # apt-get download drops root to the _apt user where it can
    download_debian_packages(listing, work, downloads, log, name, say, heartbeat)
    for deb in sorted(downloads.glob("*.deb")):
        build_steps.run_logged(["dpkg", "-x", str(deb), str(target)], log, name, say, heartbeat)
    shutil.rmtree(str(downloads))


def provide_libraries(env, log, say, heartbeat):
    """Make the libraries `env`'s kernel needs loadable, in the environment's own folders.

    Aliases (env.library_aliases) link to the system's copies where its loader cache has them; otherwise, and
    always for packages of another Debian suite than the system's, the pinned Debian packages of
    envs/<name>-debian.txt are fetched with apt-get download and extracted with dpkg -x (nothing installed).
    Stand-in libraries (env.stand_in_libraries) are then compiled with the C compiler.
    """
    aliases = env.path / LIBRARY_ALIASES_DIR
    aliases.mkdir(parents=True, exist_ok=True)
    other_suite = env.debian_packages is not None and debian_suite(env.debian_packages) is not None
    provided = {name: None if other_suite else system_library(name) for _, name in env.library_aliases}
    if other_suite or not all(provided.values()):
        missing = ", ".join(name for name, path in provided.items() if not path)
        if not (env.debian_packages and shutil.which("apt-get") and shutil.which("dpkg")):
            raise MachineLacks("needs {}, which this system lacks and cannot fetch without apt-get; install OpenMPI 4 "
                             "(Debian/Ubuntu: libopenmpi3) and rerun the setup".format(missing or "Debian's packages"))
        why = "packages of Debian {}".format(debian_suite(env.debian_packages)[0]) if other_suite else (
            missing + " not on this system")
        say("[setup] {}: {}; extracting the Debian packages of {}".format(
            env.name, why, build_steps.shown(env.debian_packages)))
        extract_debian_packages(env.debian_packages, env.path / DEBIAN_DIR, env.path, log, env.name, say, heartbeat)
        found = {}  # each library's first copy, outer folders first (Debian keeps alternatives in subfolders)
        for folder in library_folders(env)[1:]:
            for path in sorted(folder.rglob("*.so*"), key=lambda path: (len(path.parts), path.name)):
                found.setdefault(path.name, path)
        provided = {name: provided[name] or found.get(name) for name in provided}
        if not all(provided.values()):
            raise SetupError("the Debian packages of {} lack {}".format(
                env.debian_packages.name, ", ".join(name for name, path in provided.items() if not path)))
    for wanted, name in env.library_aliases:
        link = aliases / wanted
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(provided[name])
        log.write("linked {} -> {}\n".format(link, provided[name]))
    for name, source in env.stand_in_libraries:
        compiler = shutil.which(os.environ.get("CC", "cc"))
        if compiler is None:
            raise MachineLacks("needs a C compiler (cc, or $CC) to build its stand-in {}".format(name))
        build_steps.run_logged([compiler, "-shared", "-fPIC", "-O2", "-Wl,-soname," + name, "-o", str(aliases / name),
                                str(catalog.REQUIREMENTS_DIR / source)], log, env.name, say, heartbeat)
