#!/usr/bin/env python3
"""The one package list (tools/packages.txt) against what the build and the binaries really use.

A fresh Debian machine has only what tools/lib.sh installs from the list, and the Docker image
only what its stages install from it; a package that is merely present on the developer's machine
hides a missing line until a user's first try. These tests read the truth from the tools that know
it: meson's introspection and pkg-config for the build, readelf for the binaries' shared
libraries, dpkg for which package owns a file.

usage: packages_test.py BUILD_DIR   (run by meson test, suite packaging)
"""
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(REPO, "build")
DOCKERFILE = os.path.join(REPO, "tools", "docker", "Dockerfile")


def run(*args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, **kwargs)


def listed(*roles):
    """Packages of `roles`, asked of tools/lib.sh itself (the function the scripts install with)."""
    out = run("bash", "-c", '. tools/lib.sh && packages "$@"', "-", *roles, cwd=REPO, check=True).stdout
    return set(out.split())


def dpkg_names(path):
    """The names dpkg may have recorded `path` under: as given, normalised, with symlinks resolved,
    and either side of the /usr merge (/lib/x and /usr/lib/x are one file on a merged system)."""
    names = [path, os.path.normpath(path), os.path.realpath(path)]
    for p in list(names):
        if p.startswith(("/usr/lib/", "/usr/bin/", "/usr/sbin/")):
            names.append(p[len("/usr"):])
        elif p.startswith(("/lib/", "/lib64/", "/bin/", "/sbin/")):
            names.append("/usr" + p)
    return list(dict.fromkeys(names))


def owners(paths):
    """{path: [the Debian packages that installed it]} for each of `paths` some package installed.
    Files only: a folder such as /usr/include belongs to every package with a file in it, and
    dpkg lists them in no useful order (gawk first, on one fresh machine). One dpkg call per 500
    names: dpkg reads its database once per call, and matches an absolute path exactly."""
    names = {path: dpkg_names(path) for path in paths}
    every = sorted({n for ns in names.values() for n in ns})
    found = {}
    for i in range(0, len(every), 500):
        for line in run("dpkg", "-S", *every[i:i + 500]).stdout.splitlines():
            packages, sep, name = line.partition(": ")
            if sep and not line.startswith(("diversion by ", "local diversion ")):
                found[name.strip()] = [p.split(":")[0].strip() for p in packages.split(",")]
    result = {}
    for path, ns in names.items():
        hit = next((found[n] for n in ns if n in found), None)
        if hit is not None:
            result[path] = hit
    return result


def owner(path):
    """The Debian package that installed the file `path`, or None."""
    return owners([path]).get(path, [None])[0]


def depends(package):
    """Direct dependencies of an installed package."""
    out = run("dpkg-query", "-W", "-f=${Pre-Depends},${Depends}", package).stdout
    return {re.split(r"[ (:]", alt.strip())[0] for dep in out.split(",") for alt in dep.split("|") if alt.strip()}


def covered(package, roles, depth=3):
    """Whether installing `roles` installs `package`: listed, or pulled in by a listed package
    (libboost-test-dev -> libboost-test1.74-dev -> libboost-test1.74.0; g++ -> g++-12)."""
    frontier = listed(*roles)
    seen = set(frontier)
    for _ in range(depth):
        if package in seen:
            return True
        frontier = {d for p in frontier for d in depends(p)} - seen
        seen |= frontier
    return package in seen


def uncovered(programs, role, path):
    """The programs (looked up on `path`) whose Debian package installing `role` does not bring."""
    missing = []
    for prog in programs:
        found = shutil.which(prog, path=path)
        if found is None:
            raise AssertionError(f"{prog} is not installed")
        package = owner(found)
        if package is None or not covered(package, [role]):
            missing.append(f"{prog} ({found}) comes from {package}")
    return missing


@functools.lru_cache(maxsize=None)
def in_base_image(package):
    """Packages every Debian image has, bookworm-slim included: the C library, and whatever dpkg
    marks essential or required."""
    if package == "libc6":
        return True
    out = run("dpkg-query", "-W", "-f=${Essential} ${Priority}", package).stdout.split()
    return "yes" in out or "required" in out


def dockerfile_stages():
    """[(stage name, [RUN command text])] of the Dockerfile, continuation lines joined."""
    text = open(DOCKERFILE, encoding="utf-8").read().replace("\\\n", " ")
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if re.match(r"(?i)^FROM\s", line):
            stages.append((line, []))
        elif re.match(r"(?i)^RUN\s", line) and stages:
            stages[-1][1].append(line[4:])
    return stages


def roles_installed_by(run_lines):
    roles = set()
    for cmd in run_lines:
        if re.search(r"apt-get\s+install", cmd):
            raise AssertionError(f"the Dockerfile installs packages outside tools/packages.txt: {cmd}")
        for m in re.finditer(r"ensure_packages((?:\s+[a-z]+)+)", cmd):
            roles.update(m.group(1).split())
    return roles


class BuildDependencies(unittest.TestCase):
    def test_every_meson_dependency_is_in_the_build_list(self):
        import json
        deps = json.loads(run("meson", "introspect", BUILD, "--dependencies", check=True).stdout)
        self.assertGreater(len(deps), 5, "meson introspection found no dependencies")
        missing = []
        for dep in deps:
            files = []
            pc = run("pkg-config", "--path", dep["name"])
            if pc.returncode == 0 and pc.stdout.strip():
                files.append(pc.stdout.strip())
            files += [a for a in dep["link_args"] if a.startswith("/")]
            # Not its -I folders: /usr/include (Boost's) holds files of dozens of packages. Every
            # header the build includes from them is mapped by the next test, file by file.
            if not files:
                continue  # threads: part of libc; Boost's headers: the next test
            package = owner(files[0])
            self.assertIsNotNone(package, f"no Debian package owns {files[0]} (dependency {dep['name']})")
            if not covered(package, ["build"]):
                missing.append(f"{dep['name']} ({files[0]}) comes from {package}")
        self.assertEqual(missing, [], "build dependencies missing from tools/packages.txt (role build)")

    def test_every_header_the_build_includes_is_in_the_build_list(self):
        # A header-only library (Boost.Beast and Asio) has no pkg-config file and no library to
        # link: the compiler's own record of what each object included is where it shows. Each
        # header file is mapped to its own package (a folder is shared by many).
        out = run("ninja", "-C", BUILD, "-t", "deps", check=True).stdout
        ours = (REPO + os.sep, BUILD + os.sep)
        headers = {line.strip() for line in out.splitlines() if line.startswith("    /")}
        headers = {h for h in headers if not os.path.normpath(h).startswith(ours)}
        self.assertTrue(any("/boost/" in h for h in headers), "ninja's deps name no Boost header")
        found = owners(headers)
        unowned = sorted(headers - found.keys())
        self.assertEqual(unowned[:5], [], f"no Debian package owns {len(unowned)} header(s) the build includes")
        # The packages installing role build brings, once.
        reach = listed("build")
        frontier = set(reach)
        for _ in range(5):
            frontier = {d for p in frontier for d in depends(p)} - reach
            reach |= frontier
        missing = {}
        for header in sorted(headers):
            packages = found[header]
            if not any(p in reach or in_base_image(p) for p in packages):
                missing.setdefault(", ".join(packages), []).append(header)
        self.assertEqual([f"{package}: {len(hs)} header(s), e.g. {hs[0]}" for package, hs in sorted(missing.items())], [],
                         "headers from packages missing from tools/packages.txt (role build)")

    def test_the_build_tools_are_in_the_build_list(self):
        import json
        with open(os.path.join(BUILD, "compile_commands.json"), encoding="utf-8") as f:
            command = json.load(f)[0]["command"].split()
        # meson puts ccache before the compiler when it is installed (role test brings it, for the
        # deploy suite's package build): a wrapper the build does not need.
        if os.path.basename(command[0]) == "ccache":
            self.assertEqual(uncovered(["ccache"], "test", "/usr/local/bin:/usr/bin:/bin"), [])
            command = command[1:]
        programs = [command[0], "meson", "ninja", "pkg-config", "python3"]
        # A fresh Debian machine's PATH: a python3 of pyenv or a meson of pip is not what a user gets.
        missing = uncovered(programs, "build", "/usr/local/bin:/usr/bin:/bin")
        self.assertEqual(missing, [], "build tools missing from tools/packages.txt (role build)")



class RuntimeLibraries(unittest.TestCase):
    def image_binaries(self):
        text = open(DOCKERFILE, encoding="utf-8").read()
        paths = []
        for m in re.finditer(r"COPY\s+--from=build\s+([^\n]+)", text):
            parts = m.group(1).split()
            paths += [p for p in parts[:-1] if p.startswith("/build/")]
        self.assertIn("/build/src/outbox-bridge", paths, "the image must carry outbox-bridge")
        return [os.path.join(BUILD, p[len("/build/"):]) for p in paths]

    def test_every_shared_library_of_the_image_binaries_is_in_the_runtime_list(self):
        libraries = {}
        for line in run("ldconfig", "-p").stdout.splitlines()[1:]:
            m = re.match(r"\s*(\S+) \(([^)]*)\) => (\S+)", line)
            if m and "x86-64" in m.group(2):
                libraries.setdefault(m.group(1), m.group(3))
        missing = []
        for binary in self.image_binaries():
            self.assertTrue(os.path.exists(binary), f"{binary} is not built")
            needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run("readelf", "-d", binary).stdout)
            self.assertTrue(needed, f"readelf found no shared libraries in {binary}")
            for soname in needed:
                path = libraries.get(soname)
                self.assertIsNotNone(path, f"{soname} (needed by {binary}) is not known to ldconfig")
                package = owner(path)
                self.assertIsNotNone(package, f"no Debian package owns {path}")
                if package not in listed("runtime") and not in_base_image(package):
                    missing.append(f"{os.path.basename(binary)} needs {soname} from {package}")
        self.assertEqual(sorted(set(missing)), [], "runtime libraries missing from tools/packages.txt (role runtime)")


class TheListIsTheOneList(unittest.TestCase):
    def test_every_listed_package_is_installed_here(self):
        # The test machine ran tools/test, which installs every role but runtime; the runtime
        # libraries come with the -dev packages. A misspelt name fails here.
        absent = [p for p in sorted(listed("build", "runtime", "stack", "test"))
                  if run("bash", "-c", '. tools/lib.sh && present "$1"', "-", p, cwd=REPO).returncode != 0]
        self.assertEqual(absent, [], "listed but not installed (a typo, or not a bookworm package)")

    def test_the_dockerfile_stages_install_from_the_list(self):
        stages = dockerfile_stages()
        self.assertEqual(len(stages), 2, "expected a build stage and a runtime stage")
        self.assertEqual(roles_installed_by(stages[0][1]), {"build"}, "the build stage must install role build")
        self.assertEqual(roles_installed_by(stages[1][1]), {"runtime"}, "the runtime stage must install role runtime")

    def test_the_dockerfile_builds_with_the_commands_tools_test_runs(self):
        build_runs = " ".join(dockerfile_stages()[0][1])
        self.assertRegex(build_runs, r"\. tools/lib\.sh", "the build stage must build with tools/lib.sh")
        self.assertRegex(build_runs, r"\bbuild /build\b", "the build stage must call lib.sh's build function")
        test_script = open(os.path.join(REPO, "tools", "test"), encoding="utf-8").read()
        self.assertRegex(test_script, r'\nconfigure_build "\$repo/build"',
                         "tools/test sets up its build with lib.sh's configure_build, as its build function does")
        lib = open(os.path.join(REPO, "tools", "lib.sh"), encoding="utf-8").read()
        self.assertRegex(lib, r'\nbuild\(\) \{\n(?:  .*\n)*  configure_build "\$dir" "\$@"\n',
                         "lib.sh's build function sets up with configure_build")

    def test_the_scripts_install_the_roles_they_use(self):
        for script, roles in (("test", {"build", "stack", "test"}), ("demo", {"build", "stack"}),
                              ("bench", {"build", "stack"})):
            text = open(os.path.join(REPO, "tools", script), encoding="utf-8").read()
            m = re.search(r"^ensure_packages((?: [a-z]+)+)$", text, re.M)
            self.assertIsNotNone(m, f"tools/{script} does not call ensure_packages")
            self.assertEqual(set(m.group(1).split()), roles, f"tools/{script} installs the wrong roles")

    def test_the_deploy_suite_s_programs_are_in_the_test_list(self):
        programs = ["dpkg-buildpackage", "dh", "lintian", "ccache", "systemd-analyze", "promtool", "prometheus", "git"]
        missing = uncovered(programs, "test", os.environ.get("PATH", "") + ":/usr/sbin")
        self.assertEqual(missing, [], "programs of tests/deploy missing from tools/packages.txt (role test)")

    def test_the_package_s_build_dependencies_are_in_the_build_and_test_lists(self):
        # The deploy suite's dpkg-buildpackage checks debian/control's Build-Depends and, always,
        # build-essential (a fresh Debian 12 failed there: "Unmet build dependencies:
        # build-essential:native"). A virtual name counts when a package the lists bring provides it.
        text = open(os.path.join(REPO, "debian", "control"), encoding="utf-8").read()
        m = re.search(r"^Build-Depends:((?:.*\n)(?:[ \t].*\n)*)", text, re.M)
        self.assertIsNotNone(m, "debian/control has no Build-Depends")
        wanted = [[re.split(r"[ (:\[]", alt.strip())[0] for alt in dep.split("|")]
                  for dep in m.group(1).split(",") if dep.strip()] + [["build-essential"]]
        reach = listed("build", "test")
        frontier = set(reach)
        for _ in range(5):
            frontier = {d for p in frontier for d in depends(p)} - reach
            reach |= frontier
        out = run("dpkg-query", "-W", "-f=${Provides},", *sorted(reach)).stdout
        provided = {re.split(r"[ (:]", name.strip())[0] for name in out.split(",") if name.strip()}
        missing = [" | ".join(alts) for alts in wanted if not any(a in reach or a in provided for a in alts)]
        self.assertEqual(missing, [], "the package's build dependencies missing from tools/packages.txt (roles build, test)")

    def test_the_go_client_s_modules_are_in_the_test_list(self):
        # clients/go/vendor.sh builds from Debian's Go source tree, one directory a module of
        # go.mod (direct and indirect): each must come from a package that role test brings, and
        # the go command too.
        with open(os.path.join(REPO, "clients", "go", "go.mod"), encoding="utf-8") as f:
            text = f.read()
        modules = re.findall(r"^\s*(?:require\s+)?([a-z0-9.-]+\.[a-z]+/[^\s]+)\s+v[0-9]", text, re.M)
        self.assertGreaterEqual(len(modules), 5, f"go.mod's modules not found: {modules}")
        missing = []
        for module in modules:
            path = os.path.join("/usr/share/gocode/src", module)
            package = owner(os.path.join(path, "go.mod")) or owner(path)
            if package is None or not covered(package, ["test"]):
                missing.append(f"{module} ({path}) comes from {package}")
        missing += uncovered(["go"], "test", os.environ.get("PATH", ""))
        self.assertEqual(missing, [], "the Go client's modules missing from tools/packages.txt (role test)")

    def test_the_stack_programs_are_in_the_stack_list(self):
        text = open(os.path.join(REPO, "tools", "stack"), encoding="utf-8").read()
        m = re.search(r"for t in ([^;]+); do", text)
        self.assertIsNotNone(m, "tools/stack's require_tools list not found")
        missing = uncovered(m.group(1).split(), "stack", os.environ.get("PATH", "") + ":/usr/sbin")
        self.assertEqual(missing, [], "programs of tools/stack missing from tools/packages.txt (role stack)")


class EnsurePackages(unittest.TestCase):
    """tools/lib.sh's ensure_packages with apt-get, dpkg-query and id replaced by fakes."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.bin = os.path.join(self.dir, "bin")
        os.mkdir(self.bin)
        self.policy = os.path.join(self.dir, "policy-rc.d")
        self.log = os.path.join(self.dir, "log")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def fake(self, name, body):
        path = os.path.join(self.bin, name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + body + "\n")
        os.chmod(path, 0o755)

    def ensure(self, uid="0", installed="", install_status=0):
        # dpkg-query says "installed" only for the packages in $installed.
        self.fake("dpkg-query", f'for p in {installed}; do [ "$p" = "$3" ] && printf "install ok installed" && exit 0; done; exit 1')
        self.fake("id", f"echo {uid}")
        self.fake("apt-get", f'echo "apt-get $* policy:$([ -e {self.policy} ] && echo present || echo absent)" >> {self.log}; '
                             f'[ "$1" = update ] && exit 0; exit {install_status}')
        env = dict(os.environ, PATH=self.bin + ":" + os.environ["PATH"], OUTBOX_POLICY_RC_D=self.policy)
        return run("bash", "-c", '. tools/lib.sh && ensure_packages build && echo ENSURED', cwd=REPO, env=env)

    def apt_log(self):
        return open(self.log).read() if os.path.exists(self.log) else ""

    def test_an_existing_policy_rc_d_is_left_alone_and_the_script_goes_on(self):
        with open(self.policy, "w") as f:
            f.write("#!/bin/sh\nexit 101\n")
        r = self.ensure()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ENSURED", r.stdout)
        self.assertTrue(os.path.exists(self.policy), "a policy-rc.d that was there must stay")
        self.assertIn("install -y", self.apt_log())

    def test_a_policy_rc_d_is_made_for_the_install_and_removed_after(self):
        r = self.ensure()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ENSURED", r.stdout)
        self.assertRegex(self.apt_log(), r"install -y .*policy:present")
        self.assertFalse(os.path.exists(self.policy), "the policy-rc.d made for the install must go")

    def test_a_failed_install_says_so_and_cleans_up(self):
        r = self.ensure(install_status=100)
        self.assertEqual(r.returncode, 1)
        self.assertIn("apt-get install", r.stderr)
        self.assertIn("failed", r.stderr)
        self.assertFalse(os.path.exists(self.policy))

    def test_a_normal_user_is_told_what_to_install(self):
        r = self.ensure(uid="1000")
        self.assertEqual(r.returncode, 1)
        self.assertIn("sudo apt-get install", r.stderr)
        self.assertIn("libcpp-httplib-dev", r.stderr)
        self.assertEqual(self.apt_log(), "", "a normal user's run must not call apt-get")

    def test_node_and_npm_from_elsewhere_count_as_installed(self):
        # dpkg knows neither (NodeSource's nodejs bundles npm); their commands are on PATH.
        self.fake("dpkg-query", "exit 1")
        self.fake("node", "exit 0")
        self.fake("npm", "exit 0")
        env = dict(os.environ, PATH=self.bin + ":" + os.environ["PATH"])
        for package in ("nodejs", "npm"):
            r = run("bash", "-c", '. tools/lib.sh && present "$1"', "-", package, cwd=REPO, env=env)
            self.assertEqual(r.returncode, 0, package)
        r = run("bash", "-c", '. tools/lib.sh && present g++', cwd=REPO, env=env)
        self.assertNotEqual(r.returncode, 0, "any other package is what dpkg says")

    def test_a_normal_user_with_everything_installed_goes_on(self):
        r = self.ensure(uid="1000", installed=" ".join(sorted(listed("build"))))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ENSURED", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
