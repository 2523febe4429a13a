"""The operator's inputs in every order: disable, drain, weight 0, weight N
and delete are each an input of the rotation decision, and none writes
another (disable, then weight 0, then weight 5 leaves the server disabled).
Through the real admin API of the real lb, against real backends: after
each order the server's /stats state, its weight, and whether it gets new
connections match the inputs as last set."""

import itertools
import json

import harness
from admin_client import Admin, make_admin_config
from harness import HOST, wait_for

TOKEN = "orders-token"
STEPS = ("disable", "drain", "weight0", "weight5")
PICKS = 6           # connections per traffic check (2 workers: one gets 3)


def servers_of(st):
    return {s["name"]: s for p in st["pools"] if p["name"] == "web" for s in p["servers"]}


class Model:
    """What the inputs set so far say of the server."""

    def __init__(self):
        self.admin, self.weight, self.deleted = "none", 1, False

    def apply(self, step):
        if step in ("disable", "drain"):
            self.admin = step
        elif step == "weight0":
            self.weight = 0
        elif step == "weight5":
            self.weight = 5
        else:
            self.deleted = True

    def state(self):
        if self.admin == "disable":
            return "disabled"
        if self.admin == "drain" or self.weight == 0:
            return "draining"
        return "up"


class AdminOrdersTest(harness.LbTestCase):
    def setUp(self):
        super().setUp()
        self.a = self.named("A")
        self.b = self.named("B")
        text, self.admin_port, ports = make_admin_config(
            [("web", [("web1", self.a.addr)], {})], token=TOKEN)
        self.port = ports["fe_web"]
        self.admin = Admin(self.admin_port, token=TOKEN)
        self.lb = self.start_lb(text)

    def post(self, path, body=None):
        return self.admin.post(path, body=json.dumps(body) if body is not None else None,
                               headers={"Content-Type": "application/json"})

    def delete(self, name):
        return self.admin.request("DELETE", f"/pools/web/servers/{name}",
                                  headers={"Authorization": f"Bearer {TOKEN}"})

    def names(self):
        got = []
        for _ in range(PICKS):
            with harness.connect(self.port) as s:
                got.append(harness.read_line(s).decode().strip())
        return got

    def add(self, name):
        r = self.post("/pools/web/servers", {"name": name, "address": self.b.addr, "weight": 1})
        self.assertEqual(r.status, 201, str(r))
        self.assertEqual(r.json()["state"], "up", str(r))   # no check: up at once

    def order(self, name, step):
        if step == "delete":
            r = self.delete(name)
        elif step.startswith("weight"):
            r = self.post(f"/pools/web/servers/{name}/weight", {"weight": int(step[6:])})
        else:
            r = self.post(f"/pools/web/servers/{name}/{step}")
        return r

    def check(self, name, model, what):
        srv = servers_of(self.admin.stats()).get(name)
        names = self.names()
        if model.deleted:
            self.assertIsNone(srv, f"{what}: still in the pool after its delete")
            self.assertEqual(set(names), {"A"}, f"{what}: traffic after its delete")
            return
        self.assertIsNotNone(srv, what)
        self.assertEqual((srv["state"], srv["admin"], srv["weight"]),
                         (model.state(), model.admin, model.weight), what)
        if model.state() == "up":
            self.assertIn("B", names, f"{what}: in rotation but no connection: {names}")
        else:
            self.assertEqual(set(names), {"A"}, f"{what}: out of rotation but served")

    def run_orders(self, name, steps):
        model = Model()
        self.add(name)
        self.check(name, model, f"{name} added")
        done = []
        for step in steps:
            r = self.order(name, step)
            done.append(step)
            what = f"{name} after {' -> '.join(done)}"
            if model.deleted:
                self.assertEqual(r.status, 404, f"{what}: {r}")
            else:
                self.assertEqual(r.status, 200, f"{what}: {r}")
            model.apply(step)
            self.check(name, model, what)
        if not model.deleted:
            self.assertEqual(self.delete(name).status, 200)
            wait_for(lambda: name not in servers_of(self.admin.stats()), 5.0,
                     f"{name} gone after its delete")

    def test_disable_weight0_weight5_stays_disabled(self):
        self.run_orders("web9", ["disable", "weight0", "weight5"])

    def test_every_order(self):
        # every order of the four inputs, with the delete at each place in
        # turn (and once none): after each step, the state and the traffic
        # are those of the inputs so far
        for i, perm in enumerate(itertools.permutations(STEPS)):
            steps = list(perm)
            at = i % (len(steps) + 2)
            if at <= len(steps):
                steps.insert(at, "delete")
            with self.subTest(" -> ".join(steps)):
                self.run_orders(f"s{i}", steps)
        self.lb.assert_running()


if __name__ == "__main__":
    harness.main()
