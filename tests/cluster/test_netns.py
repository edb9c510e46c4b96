"""test_netns.py — scripts/cluster's network layer (issue #25): `up DIR --stores 2` makes one
namespace per host (front, store1, store2, ldap, sink, client, client2) plus a bridge
namespace, each host with one address in 198.18.0.0/15 and no default route, every host
reachable from the client; `down` removes exactly what DIR records and is idempotent; a
failed `up` removes what it made and leaves a namespace it did not make alone. Needs root:
otherwise exit 77 (skip).
The daemons inside the namespaces (`up --daemons`) are test_datacentre.py's."""
import ipaddress
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
CLUSTER = os.path.join(ROOT, "scripts", "cluster")
DC = ipaddress.ip_network("198.18.0.0/15")


def sh(*args, check=True):
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=check)


def namespaces(pfx):
    """The namespaces named pfx-*: this test's only (other tests make their own, in parallel)."""
    out = sh("ip", "netns", "list").stdout
    names = {line.split()[0] for line in out.splitlines() if line.strip()}
    return {n for n in names if n.startswith(pfx + "-")}


class NetnsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = os.path.join(self.tmp.name, "dc")

    def tearDown(self):
        sh(CLUSTER, "down", self.dir, check=False)
        self.tmp.cleanup()

    def hosts(self):
        with open(os.path.join(self.dir, "hosts")) as f:
            return [line.split() for line in f if line.strip()]

    def prefix(self):
        """hc<K>, K derived from the directory (scripts/cluster's naming)."""
        return "hc" + sh("sh", "-c", 'printf %s "$1" | cksum | cut -c1-6', "-",
                         os.path.realpath(self.dir)).stdout.strip()

    def test_up_status_down(self):
        os.makedirs(self.dir, exist_ok=True)
        pfx = self.prefix()
        before = namespaces(pfx)
        sh(CLUSTER, "up", self.dir, "--stores", "2")
        hosts = self.hosts()
        self.assertTrue(all(h[1].startswith(pfx + "-") for h in hosts), hosts)
        self.assertEqual(sorted(h[0] for h in hosts),
                         ["client", "client2", "front", "ldap", "sink", "store1", "store2"])
        with open(os.path.join(self.dir, "netns")) as f:
            made = {line.strip() for line in f if line.strip()}
        self.assertEqual(len(made), 8)  # seven hosts and the bridge
        self.assertEqual(namespaces(pfx) - before, made)
        for name, ns, addr in hosts:
            self.assertIn(ipaddress.ip_address(addr), DC, name)
            routes = sh("ip", "-n", ns, "route", "show").stdout
            self.assertNotIn("default", routes, name)
            addrs = sh("ip", "-n", ns, "-4", "-o", "addr", "show").stdout
            for line in addrs.splitlines():
                a = ipaddress.ip_interface(line.split()[3]).ip
                self.assertTrue(a.is_loopback or a in DC, f"{name}: {a}")
        st = sh(CLUSTER, "status", self.dir)
        self.assertEqual(st.stdout.count("reachable"), 7, st.stdout)
        self.assertNotIn("UNREACHABLE", st.stdout)
        sh(CLUSTER, "down", self.dir)
        self.assertEqual(namespaces(pfx) & made, set())
        sh(CLUSTER, "down", self.dir)  # idempotent
        self.assertEqual(namespaces(pfx) - before, set())

    def test_failed_up_cleans_up(self):
        # make the store2 namespace's name taken, so `up` fails part-way
        sh(CLUSTER, "up", self.dir, "--stores", "1")
        pfx = self.hosts()[0][1].rsplit("-", 1)[0]
        sh(CLUSTER, "down", self.dir)
        before = namespaces(pfx)
        taken = pfx + "-store2"
        sh("ip", "netns", "add", taken)
        try:
            r = sh(CLUSTER, "up", self.dir, "--stores", "2", check=False)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("up failed", r.stderr)
            self.assertEqual(namespaces(pfx), before | {taken})
            self.assertFalse(os.path.exists(os.path.join(self.dir, "netns")))
        finally:
            sh("ip", "netns", "del", taken, check=False)


if __name__ == "__main__":
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    if os.geteuid() != 0 or probe.returncode != 0:
        print("test_netns: needs root with CAP_NET_ADMIN; skipping", file=sys.stderr)
        sys.exit(77)
    unittest.main(argv=sys.argv[:1])
