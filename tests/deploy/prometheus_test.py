#!/usr/bin/env python3
"""The alert rules and the dashboard, proven on a real Prometheus (Debian's, role test).

promtool checks and unit-tests deploy/prometheus/outbox-bridge.rules.yml; then a Prometheus of
this test's own scrapes a running bridge every second with those rules: a poison row halts the
source and OutboxSourceHalted fires, a quarantine resolves it; the bridge's own nats-server dies
and OutboxNatsDown fires, and resolves when it is back. Every query of
deploy/grafana/outbox-bridge.json must parse and return data from that Prometheus.

usage: prometheus_test.py   (run by meson test, suite deploy, with the stack's environment)
"""
import json
import os
import random
import subprocess
import time
import unittest
import urllib.parse
import urllib.request

from deploy_support import REPO, binary, env, free_port, sql, until

RULES = os.path.join(REPO, "deploy", "prometheus", "outbox-bridge.rules.yml")
RULES_TEST = os.path.join(REPO, "deploy", "prometheus", "outbox-bridge.rules.test.yml")
DASHBOARD = os.path.join(REPO, "deploy", "grafana", "outbox-bridge.json")


TMP = os.environ.get("OUTBOX_TEST_TMP") or "/tmp/outbox-deploy-test"
os.makedirs(TMP, exist_ok=True)


def get_json(url):
    """The JSON answer of a GET, {} when nothing answers (yet)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        try:
            return json.load(e)
        except ValueError:  # a server still starting answers in plain text
            return {}
    except (OSError, ValueError):
        return {}


class Process:
    def __init__(self, argv, log):
        self.log_path = log
        self.argv = argv
        self.start()

    def start(self):
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def log(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


class RulesFile(unittest.TestCase):
    def test_promtool_checks_the_rules(self):
        out = subprocess.run([binary("promtool"), "check", "rules", RULES], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        import yaml
        with open(RULES, encoding="utf-8") as f:
            rules = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]
        self.assertGreaterEqual(len(rules), 9)  # the alerts the README lists under "Alerts"
        self.assertIn(f"SUCCESS: {len(rules)} rules found", out.stdout)

    def test_every_alert_has_a_unit_test_that_fires_and_one_that_does_not(self):
        import yaml
        with open(RULES, encoding="utf-8") as f:
            alerts = {r["alert"] for g in yaml.safe_load(f)["groups"] for r in g["rules"] if "alert" in r}
        with open(RULES_TEST, encoding="utf-8") as f:
            cases = [c for t in yaml.safe_load(f)["tests"] for c in t["alert_rule_test"]]
        for alert in sorted(alerts):
            mine = [c for c in cases if c["alertname"] == alert]
            self.assertTrue(any(c["exp_alerts"] for c in mine), f"{alert}: no case where it fires")
            self.assertTrue(any(not c["exp_alerts"] for c in mine), f"{alert}: no case where it does not")
            for c in mine:
                for a in c["exp_alerts"]:
                    self.assertIn("summary", a.get("exp_annotations", {}), alert)
        out = subprocess.run([binary("promtool"), "test", "rules", os.path.basename(RULES_TEST)],
                             cwd=os.path.dirname(RULES_TEST), capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("SUCCESS", out.stdout)

    def test_the_dashboard_has_a_query_in_every_panel(self):
        with open(DASHBOARD, encoding="utf-8") as f:
            dashboard = json.load(f)
        panels = [p for p in dashboard["panels"] if p["type"] != "row"]
        self.assertGreaterEqual(len(panels), 10)
        for p in panels:
            self.assertTrue(p.get("targets"), p["title"])
            self.assertTrue(all(t.get("expr") for t in p["targets"]), p["title"])
            self.assertTrue(p.get("description"), p["title"])


class LivePrometheus(unittest.TestCase):
    """A bridge with a nats-server of its own, scraped every second by a Prometheus with the rules."""

    @classmethod
    def setUpClass(cls):
        suffix = "%06x" % random.randrange(1 << 24)
        cls.base = os.path.join(TMP, f"deploy-{suffix}")
        os.makedirs(cls.base, exist_ok=True)
        cls.database = f"t_deploy_{suffix}"
        cls.source = f"dep{suffix}"
        cls.outbox = f"{cls.source}_control_outbox"
        sql(None, f"CREATE DATABASE {cls.database}")
        cls.nats_port = free_port()
        cls.nats = Process([binary("nats-server"), "-js", "-a", "127.0.0.1", "-p", str(cls.nats_port),
                            "-sd", os.path.join(cls.base, "nats")], os.path.join(cls.base, "nats.log"))
        cls.http_port = free_port()
        cls.config = os.path.join(cls.base, "outbox.toml")
        with open(cls.config, "w", encoding="utf-8") as f:
            f.write(f'[nats]\nurl = "nats://127.0.0.1:{cls.nats_port}"\nconnect_timeout = "2s"\n\n'
                    f'[http]\nlisten = "127.0.0.1:{cls.http_port}"\n\n'
                    f'[[source]]\nname = "{cls.source}"\n'
                    f'dsn = "mysql://{env("OUTBOX_TEST_MYSQL_USER")}@{env("OUTBOX_TEST_MYSQL_HOST")}:'
                    f'{env("OUTBOX_TEST_MYSQL_PORT")}/{cls.database}"\n'
                    f'password = "{env("OUTBOX_TEST_MYSQL_PASSWORD")}"\npoll_interval = "20ms"\n'
                    'settle = "200ms"\n'  # the settled stream's panels need its metrics
                    f'snapshot_query = "SELECT id, op FROM {cls.outbox}"\nsnapshot_key = "id"\n')
        bridge_bin = env("OUTBOX_TEST_BRIDGE_BIN")
        migrate = subprocess.run([bridge_bin, "migrate", "--config", cls.config], capture_output=True, text=True)
        if migrate.returncode != 0:
            raise RuntimeError("migrate: " + migrate.stderr)
        cls.insert(5)
        cls.bridge = Process([bridge_bin, "run", "--config", cls.config], os.path.join(cls.base, "bridge.log"))
        cls.prom_port = free_port()
        prom_config = os.path.join(cls.base, "prometheus.yml")
        with open(prom_config, "w", encoding="utf-8") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    f"rule_files:\n  - {RULES}\n"
                    "scrape_configs:\n  - job_name: outbox-bridge\n    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{cls.http_port}']\n")
        cls.prometheus = Process([binary("prometheus"), f"--config.file={prom_config}",
                                  f"--storage.tsdb.path={os.path.join(cls.base, 'tsdb')}",
                                  f"--web.listen-address=127.0.0.1:{cls.prom_port}"],
                                 os.path.join(cls.base, "prometheus.log"))
        cls.api = f"http://127.0.0.1:{cls.prom_port}/api/v1"

    @classmethod
    def tearDownClass(cls):
        for p in ("prometheus", "bridge", "nats"):
            if hasattr(cls, p):
                getattr(cls, p).stop()
        if hasattr(cls, "database"):
            sql(None, f"DROP DATABASE IF EXISTS {cls.database}")

    @classmethod
    def insert(cls, count, entity_type="thing"):
        sql(cls.database, ";".join([f"INSERT INTO {cls.outbox} (entity_type, entity_key, op, payload) "
                                    f"VALUES ('{entity_type}', 'k{i}', 'upsert', '{{\"ok\":true}}')"
                                    for i in range(count)]))

    def query(self, promql):
        answer = get_json(f"{self.api}/query?" + urllib.parse.urlencode({"query": promql}))
        self.assertEqual(answer.get("status"), "success", f"{promql}: {answer}")
        return answer["data"]["result"]

    def value(self, promql):
        result = self.query(promql)
        return float(result[0]["value"][1]) if result else None

    def firing(self, alert, **labels):
        alerts = get_json(f"{self.api}/alerts").get("data", {}).get("alerts", [])
        return any(a["labels"].get("alertname") == alert and a["state"] == "firing"
                   and all(a["labels"].get(k) == v for k, v in labels.items()) for a in alerts)

    def wait_value(self, promql, expected, seconds=30):
        until(lambda: self.value(promql) == expected, seconds,
              f"{promql} == {expected} (now {self.value(promql)})\n{self.bridge.log()[-2000:]}")

    def test_alerts_fire_and_resolve_and_every_dashboard_query_answers(self):
        until(lambda: get_json(f"{self.api}/status/runtimeinfo").get("status") == "success", 30, "Prometheus")
        self.wait_value(f'outbox_published_version{{source="{self.source}"}}', 5.0)
        self.assertFalse(self.firing("OutboxSourceHalted", source=self.source))

        # A poison row halts the source: the alert fires, naming it; the quarantine resolves it.
        self.insert(1, entity_type="bad type")  # not a subject token
        poison = sql(self.database, f"SELECT MAX(id) FROM {self.outbox}")
        until(lambda: self.firing("OutboxSourceHalted", source=self.source), 30,
              f"OutboxSourceHalted firing\n{self.bridge.log()[-2000:]}")
        alert = [a for a in get_json(f"{self.api}/alerts")["data"]["alerts"]
                 if a["labels"]["alertname"] == "OutboxSourceHalted"][0]
        self.assertIn(self.source, alert["annotations"]["summary"])
        quarantine = subprocess.run([env("OUTBOX_TEST_BRIDGE_BIN"), "quarantine", "--config", self.config,
                                     "--source", self.source, "--id", poison, "--reason", "deploy test"],
                                    capture_output=True, text=True)
        self.assertEqual(quarantine.returncode, 0, quarantine.stderr)
        self.insert(1)
        until(lambda: not self.firing("OutboxSourceHalted", source=self.source), 30, "OutboxSourceHalted resolved")
        self.wait_value(f'outbox_published_version{{source="{self.source}"}}', 6.0)

        # Every dashboard query parses and returns data (after a snapshot request, for its panel).
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/v1/sources/{self.source}/control-snapshot",
                                    timeout=10) as r:
            self.assertEqual(r.status, 200)
        self.insert(3)
        self.wait_value(f'outbox_published_version{{source="{self.source}"}}', 9.0)
        until(lambda: (self.value(f'outbox_settled_messages_total{{source="{self.source}"}}') or 0) > 0, 30,
              f"settled messages\n{self.bridge.log()[-2000:]}")
        time.sleep(3)  # a few scrapes after the changes, for the rates
        with open(DASHBOARD, encoding="utf-8") as f:
            dashboard = json.load(f)
        queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
        self.assertGreaterEqual(len(queries), 10)
        for q in queries:
            promql = q.replace("$source", self.source).replace("$__rate_interval", "1m")
            self.assertTrue(self.query(promql), f"no data for the dashboard's {q}")
        sources = get_json(f"{self.api}/label/source/values?" +
                           urllib.parse.urlencode({"match[]": "outbox_published_version"}))
        self.assertIn(self.source, sources["data"])  # the dashboard's $source variable

        # NATS down: the bridge's nats-server dies; the alert fires, and resolves when it is back.
        self.assertFalse(self.firing("OutboxNatsDown"))
        self.nats.stop()
        until(lambda: self.firing("OutboxNatsDown", instance=f"127.0.0.1:{self.http_port}"), 60,
              f"OutboxNatsDown firing\n{self.bridge.log()[-2000:]}")
        self.nats.start()
        until(lambda: not self.firing("OutboxNatsDown"), 60, f"OutboxNatsDown resolved\n{self.bridge.log()[-2000:]}")
        self.insert(1)
        self.wait_value(f'outbox_published_version{{source="{self.source}"}}', 10.0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
