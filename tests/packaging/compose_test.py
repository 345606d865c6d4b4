#!/usr/bin/env python3
"""docker-compose.yml, the Dockerfile and .dockerignore as a user starting the stack meets them.

No Docker engine runs here, so the file is checked by the real Compose v1 parser
(`docker-compose config`, Debian's 1.29.2, listed in tools/packages.txt role test) and, for what
no parser checks, by the rules a first `docker compose up` broke on.

usage: compose_test.py   (run by meson test, suite packaging)
"""
import fnmatch
import os
import re
import shutil
import subprocess
import unittest

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPOSE = os.path.join(REPO, "docker-compose.yml")
DOCKERFILE = os.path.join(REPO, "tools", "docker", "Dockerfile")


def compose():
    with open(COMPOSE, encoding="utf-8") as f:
        return yaml.safe_load(f)


def argv_of(service):
    out = []
    for key in ("entrypoint", "command"):
        value = service.get(key)
        if isinstance(value, list):
            out += [str(v) for v in value]
        elif isinstance(value, str):
            out.append(value)
    return out


class ComposeFile(unittest.TestCase):
    def test_docker_compose_v1_accepts_it(self):
        tool = shutil.which("docker-compose")
        self.assertIsNotNone(tool, "docker-compose is in tools/packages.txt (role test): tools/test installs it")
        r = subprocess.run([tool, "-f", COMPOSE, "config", "-q"], cwd=REPO, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_no_top_level_key_compose_v1_rejects(self):
        self.assertLessEqual(set(compose()), {"services", "volumes", "secrets", "networks", "configs"})

    def test_every_healthcheck_runs_a_tool_its_image_has(self):
        services = compose()["services"]
        nats = services["nats"]
        self.assertRegex(nats["image"], r"-alpine$", "the scratch-based nats image has no shell, wget or curl")
        for name, service in services.items():
            test = service.get("healthcheck", {}).get("test")
            if test and test[0] == "CMD" and test[1] in ("curl",):
                self.fail(f"{name}: healthcheck runs {test[1]}, which {service.get('image')} lacks")

    def test_services_a_healthy_dependency_waits_on_have_healthchecks(self):
        services = compose()["services"]
        for name, service in services.items():
            for dep, cond in (service.get("depends_on") or {}).items():
                if isinstance(cond, dict) and cond.get("condition") == "service_healthy":
                    hc = services[dep].get("healthcheck")
                    self.assertTrue(hc and not hc.get("disable"), f"{name} waits for {dep} to be healthy, which has no healthcheck")

    def test_the_bridge_port_is_published(self):
        ports = [str(p) for p in compose()["services"]["bridge"].get("ports", [])]
        self.assertTrue(any(p.endswith(":8080") for p in ports), f"bridge publishes {ports}")
        env = compose()["services"]["bridge"]["environment"]
        self.assertEqual(env.get("OUTBOX_BRIDGE_HTTP_LISTEN"), "0.0.0.0:8080", "the bridge must listen beyond loopback in its container")

    def test_a_shell_loop_runs_under_an_init(self):
        for name, service in compose()["services"].items():
            argv = " ".join(argv_of(service))
            if re.search(r"\bwhile\b|\bsleep\b", argv):
                self.assertTrue(service.get("init"), f"{name} runs a shell loop as PID 1 without init: true (SIGTERM is ignored)")

    def test_no_password_on_a_command_line(self):
        for name, service in compose()["services"].items():
            # printf is a shell builtin: what it writes to a file appears in no process's argv.
            argv = re.sub(r"printf [^>]*>", "", " ".join(argv_of(service)))
            self.assertNotRegex(argv, r"--password(?!-file)|\s-p\S|\$\$?\(cat ", f"{name} puts a password in argv")
            for key, value in (service.get("environment") or {}).items():
                if re.search(r"PASSWORD$|TOKEN$", key):
                    self.fail(f"{name}: {key} holds a secret inline; use {key}_FILE and a secret")

    def test_one_shot_and_loop_services_opt_out_of_the_image_healthcheck(self):
        for name, service in compose()["services"].items():
            if service.get("image", "").startswith("outbox-bridge") and name != "bridge":
                self.assertTrue(service.get("healthcheck", {}).get("disable"),
                                f"{name} would inherit the image's /readyz healthcheck and show unhealthy")

    def test_mariadb_grants_what_the_bridge_refuses_to_start_without_and_keeps_a_binlog(self):
        mariadb = compose()["services"]["mariadb"]
        mounted = {v.split(":")[1]: v.split(":")[0] for v in mariadb["volumes"] if v.startswith("./")}
        grants = [src for dst, src in mounted.items() if dst.startswith("/docker-entrypoint-initdb.d/")]
        text = "".join(open(os.path.join(REPO, g), encoding="utf-8").read() for g in grants)
        # The image gives MARIADB_USER the demo database only: PROCESS is checked at start (exit 2).
        self.assertRegex(text, r"GRANT PROCESS\b[^;]* ON \*\.\* TO 'outbox'@'%'")
        self.assertRegex(text, r"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON \*\.\* TO 'outbox'@'%'")
        argv = argv_of(mariadb)
        self.assertIn("--log-bin=mariadb-bin", argv)
        self.assertIn("--binlog-format=ROW", argv)

    def test_every_secret_file_exists(self):
        for name, secret in compose()["secrets"].items():
            self.assertTrue(os.path.isfile(os.path.join(REPO, secret["file"])), f"secret {name}: {secret['file']}")


class DockerImage(unittest.TestCase):
    def dockerfile(self):
        return open(DOCKERFILE, encoding="utf-8").read()

    def test_exposes_the_http_port(self):
        self.assertRegex(self.dockerfile(), r"(?m)^EXPOSE 8080\b")

    def test_healthcheck_needs_no_extra_tool(self):
        m = re.search(r"(?m)^HEALTHCHECK .*CMD (.*)$", self.dockerfile())
        self.assertIsNotNone(m, "no HEALTHCHECK")
        self.assertIn('"outbox-bridge"', m.group(1), "the healthcheck must use the bridge itself (the image has no curl)")

    def test_the_build_context_keeps_secrets_and_build_trees_out(self):
        patterns = [l.strip() for l in open(os.path.join(REPO, ".dockerignore"), encoding="utf-8")
                    if l.strip() and not l.startswith("#")]

        def ignored(path):
            return any(fnmatch.fnmatch(path, p) or fnmatch.fnmatch(path, p.replace("**/", "")) or
                       path.startswith(p.rstrip("/") + "/") for p in patterns)

        for path in ("tools/compose-secrets/mariadb_password", "build/src/outbox-bridge", "build-release/x",
                     ".stack-test/env", ".git/config", "certs/server.key", "tls/ca.pem",
                     "tools/node-poller/node_modules/x/index.js"):
            self.assertTrue(ignored(path), f"{path} would be sent in the build context")
        for path in ("src/cli/main.cpp", "tools/lib.sh", "tools/packages.txt", "sql/demo/demo.toml", "meson.build"):
            self.assertFalse(ignored(path), f"{path} is needed by the build but ignored")


if __name__ == "__main__":
    unittest.main(verbosity=2)
