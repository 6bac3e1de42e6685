"""Unit tests that need neither a node nor the Go code."""

import glob
import io
import os
import tarfile
import tempfile
import unittest

import gpunet
from gpunet import _bech32, age, jobspec, pack, tx, units

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


class Age(unittest.TestCase):
    def test_round_trip_sizes(self):
        a, b = age.X25519Identity.generate(), age.X25519Identity.generate()
        for n in (0, 1, 65535, 65536, 65537, 3 * 65536, 200_000):
            with self.subTest(n=n):
                plain = os.urandom(n)
                ct = age.encrypt(plain, [a.recipient(), b.recipient()])
                self.assertEqual(age.decrypt(ct, [b]), plain)
                self.assertEqual(age.decrypt(io.BytesIO(ct), [a]), plain)

    def test_truncation_and_trailing_data(self):
        a = age.X25519Identity.generate()
        ct = age.encrypt(os.urandom(70_000), [a.recipient()])
        for bad in (ct[:-1], ct[:-17], ct + b"x", ct[: len(ct) - 4500]):
            with self.assertRaises(age.AgeError):
                age.decrypt(bad, [a])

    def test_header_mac(self):
        a = age.X25519Identity.generate()
        ct = bytearray(age.encrypt(b"hi", [a.recipient()]))
        i = ct.index(b"--- ") + 5
        ct[i] = ord("A") if ct[i] != ord("A") else ord("B")
        with self.assertRaises(age.AgeError):
            age.decrypt(bytes(ct), [a])

    def test_scrypt_and_armor(self):
        ct = age.armor(age.encrypt(b"secret", [age.ScryptRecipient("pw", work_factor=10)]))
        self.assertTrue(ct.startswith("-----BEGIN AGE ENCRYPTED FILE-----\n"))
        self.assertEqual(age.decrypt(age.unarmor(ct), [age.ScryptIdentity("pw")]), b"secret")
        with self.assertRaises(age.NoIdentityMatch):
            age.decrypt(age.unarmor(ct), [age.ScryptIdentity("other")])
        with self.assertRaises(ValueError):
            age.ScryptRecipient("")

    def test_keys_round_trip(self):
        i = age.X25519Identity.generate()
        s = str(i)
        self.assertTrue(s.startswith("AGE-SECRET-KEY-1"))
        self.assertEqual(str(age.X25519Identity.parse(s).recipient()), str(i.recipient()))
        r = str(i.recipient())
        self.assertTrue(r.startswith("age1"))
        self.assertEqual(age.X25519Recipient.parse(r), i.recipient())
        for bad in ("", "age1xyz", s, r[:-1] + ("q" if r[-1] != "q" else "p")):
            with self.assertRaises(ValueError):
                age.X25519Recipient.parse(bad)


class Bech32(unittest.TestCase):
    def test_bip173_vectors(self):
        for s in ("A12UEL5L", "a12uel5l", "abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw"):
            _bech32.decode(s)
        for bad in ("A12UeL5L", "1pzry9x0s0muk", "a12uel5m"):
            with self.assertRaises(ValueError):
                _bech32.decode(bad)

    def test_address(self):
        addr = tx.address_from_pubkey(b"\x01" * 32)
        self.assertTrue(addr.startswith("gpu1") and len(addr) == 42)
        self.assertEqual(tx.parse_address(addr.upper()), addr)
        with self.assertRaises(ValueError):
            tx.parse_address("age1" + addr[4:])


class GoJSON(unittest.TestCase):
    def test_escaping_like_go(self):
        self.assertEqual(tx.go_json("<a&b>\u2028\u2029\x01\b\f\n\r\t\"\\é"),
                         '"\\u003ca\\u0026b\\u003e\\u2028\\u2029\\u0001\\b\\f\\n\\r\\t\\"\\\\é"')
        self.assertEqual(tx.go_json(tx.Map({"b": "1", "B": "2", "a": "3"})), '{"B":"2","a":"3","b":"1"}')
        self.assertEqual(tx.go_json(tx.Raw(b"\xff\x00")), '"/wA="')
        self.assertEqual(tx.go_json(tx.struct(("a", 0, True), ("b", 0, False), ("c", [], True), ("d", None, True))),
                         '{"b":0}')

    def test_message_validation(self):
        with self.assertRaises(ValueError):
            tx.msg_send("gpu1nope", 5)
        with self.assertRaises(ValueError):
            tx.msg_send(tx.address_from_pubkey(b"\x02" * 32), 0)
        with self.assertRaises(ValueError):
            tx.msg_cancel_job(-1)
        with self.assertRaises(ValueError):
            tx.msg_grant_key(1, [])


class Units(unittest.TestCase):
    def test_parse(self):
        self.assertEqual(units.parse_bytes("256MiB"), 256 << 20)
        self.assertEqual(units.parse_bytes("1.5 GB"), 1_500_000_000)
        self.assertEqual(units.parse_duration("1d12h"), 36 * units.HOUR)
        self.assertEqual(units.parse_duration("1h30m"), 90 * units.MINUTE)
        self.assertEqual(units.parse_price("0.1"), 100_000)
        self.assertEqual(units.parse_price("2 SYNC/h"), 2_000_000)
        self.assertEqual(units.parse_amount("2.5sync"), 2_500_000)
        self.assertEqual(units.parse_amount("1500usync"), 1500)
        self.assertEqual(units.parse_amount(1500), 1500)  # an int is usync
        with self.assertRaisesRegex(ValueError, r'amount "5" has no unit: write 5sync for 5 SYNC, or 5usync for 0.000005 SYNC'):
            units.parse_amount("5")  # as the CLI: a bare number is refused
        self.assertEqual(units.format_bytes(3 << 30), "3GiB")
        self.assertEqual(units.format_duration(36 * units.HOUR), "36h")
        for bad in ("0", "-5", "1.5usync", "x", "1e3"):
            with self.assertRaises(ValueError):
                units.parse_amount(bad)
        with self.assertRaisesRegex(ValueError, "ambiguous"):
            units.parse_bytes("10M")
        with self.assertRaisesRegex(ValueError, "no unit"):
            units.parse_duration("600")


class Check(unittest.TestCase):
    """submit's check before anything is locked (check.py), as the Go
    client's jobclient.Check: on a network of one CPU-only provider in eu
    (16 cores, 64 GiB, asking 1 SYNC/h), a requirement nobody offers is
    refused naming the field and what is offered instead, a max_price
    below every ask is a PriceError, and a job that waits only for a busy
    provider passes."""

    OFFER = {"address": "gpu1p", "online": True, "gpu": "cpu", "count": 0, "cpu": 16, "ram": 64.0, "disk": 500.0,
             "price": 1.0, "region": "eu", "executor": ["wasm"], "max_jobs": 4}

    class Network(gpunet.Client):
        """A Client whose quotes and offers are given: quotes(max_price) is
        the quote's JSON at that ceiling."""

        def __init__(self, quotes, offers):
            self._quotes, self._offers = quotes, offers

        def quote(self, s):
            return gpunet.types.build(gpunet.Quote, self._quotes(s.max_price))

        def offers(self, query="", sort="", all=False):
            return [gpunet.types.build(gpunet.Offer, o) for o in self._offers]

    def spec(self, resources="{cpu: 1, memory: 256MiB}", max_price="2", extra=""):
        return jobspec.parse_spec("name: t\nexecutor: wasm\nmodule: sha256:" + "0" * 64 + "\noutputs: [/out]\n"
                                  f"resources: {resources}\nmax_price: {max_price}\ntimeout: 1m\nverification: none\n{extra}",
                                  REPO)

    def check(self, spec, quoted, at_any_price):
        c = self.Network(lambda p: at_any_price if p == gpunet.check.MAX_JOB_PRICE_PER_HOUR else quoted, [self.OFFER])
        c._check(spec)

    def test_unmet(self):
        for name, spec, quote, want in (
                ("a GPU on a network without", self.spec("{cpu: 1, memory: 256MiB, gpu: {count: 1}}"),
                 {"code": "no_offer", "miss": {"seen": 0, "fit": 0, "need": 1}},
                 [gpunet.Unmet("resources.gpu.count", "1 GPU", 0, "no GPUs: 1 CPU-only provider(s)")]),
                ("a GPU model nobody has", self.spec("{cpu: 1, memory: 256MiB, gpu: {count: 2, models: [RTX_4090]}}"),
                 {"code": "no_offer", "miss": {"seen": 0, "fit": 0, "need": 1}},
                 [gpunet.Unmet("resources.gpu.models", "RTX_4090", 0, "no GPUs: 1 CPU-only provider(s)")]),
                ("more memory", self.spec("{cpu: 1, memory: 1TiB}"),
                 {"code": "no_fit", "miss": {"seen": 1, "ram": 1, "fit": 0, "need": 1}},
                 [gpunet.Unmet("resources.memory", "1TiB", 1, "at most 64 GiB")]),
                ("a region nobody is in", self.spec(extra="region: us-east\nregion_required: true\n"),
                 {"code": "no_fit", "miss": {"seen": 1, "region": 1, "fit": 0, "need": 1}},
                 [gpunet.Unmet("region", "us-east (region_required)", 1, "regions eu (1)")])):
            with self.subTest(name):
                with self.assertRaises(gpunet.UnmetError) as cm:
                    self.check(spec, quote, quote)
                self.assertEqual(cm.exception.unmet, want)
                for u in want:
                    self.assertIn(f"{u.field} {u.want}, where the network offers {u.offered}", str(cm.exception))
                self.assertIn("queue=True", str(cm.exception))

    def test_price_and_busy(self):
        over = {"code": "over_price", "reason": "cheapest other ask 1 SYNC/h > max 0.5 SYNC/h", "cheapest_ask": 1_000_000,
                "miss": {"seen": 0, "cheapest_above": 1_000_000, "fit": 0, "need": 1}}
        with self.assertRaises(gpunet.PriceError):
            self.check(self.spec(max_price="0.5"), over, {"matching": 1})
        busy = {"code": "no_fit", "miss": {"seen": 1, "busy": 1, "fit": 0, "need": 1}}
        self.check(self.spec(), busy, busy)  # waits for p1 on purpose: no error
        self.check(self.spec(), {"matching": 1}, None)  # placed at once: one quote


class Specs(unittest.TestCase):
    def test_examples_parse(self):
        paths = glob.glob(os.path.join(REPO, "examples", "*", "job.yaml"))
        self.assertGreater(len(paths), 2)
        for p in paths:
            with self.subTest(p):
                s = jobspec.load_spec(p)
                self.assertEqual(s.kind, "batch")
                self.assertTrue(s.outputs)

    def test_problems_name_field_line_column(self):
        with self.assertRaises(gpunet.SpecError) as cm:
            jobspec.parse_spec("name: x\nexecutor: wasm\nmodule: ./m.wasm\noutputs: [/out]\nmax_price: 0.5\n"
                               "timeout: 1m\nresources:\n  memory: 10PiB\n")
        (p,) = cm.exception.problems
        self.assertEqual((p.field, p.line, p.column), ("resources.memory", 8, 11))
        self.assertIn("more than the maximum 4TiB", p.message)
        self.assertIn("line 8, column 11: resources.memory:", str(cm.exception))

    def test_missing_file_names_the_file(self):
        with tempfile.TemporaryDirectory(prefix="pysdk_") as d:
            path = os.path.join(d, "job.yaml")
            with open(path, "w") as f:
                f.write("name: x\nexecutor: wasm\nmodule: ./m.wasm\noutputs: [/out]\nmax_price: 0.5\ntimeout: 1m\n")
            with self.assertRaises(gpunet.SpecError) as cm:
                jobspec.load_spec(path)
            (p,) = cm.exception.problems
            self.assertEqual((p.file, p.field, p.line, p.column), (path, "module", 3, 9))
            self.assertIn("does not exist", p.message)


class Pack(unittest.TestCase):
    def _tar(self, add):
        b = io.BytesIO()
        with tarfile.open(fileobj=b, mode="w") as t:
            add(t)
        b.seek(0)
        return b

    def test_refuses_escapes_and_links(self):
        def evil(name, typ=tarfile.REGTYPE, link=""):
            def add(t):
                ti = tarfile.TarInfo(name)
                ti.type, ti.linkname = typ, link
                t.addfile(ti, io.BytesIO(b""))
            return add
        with tempfile.TemporaryDirectory(prefix="pysdk_") as d:
            for add in (evil("../x"), evil("/etc/x"), evil("a/../../x"), evil("l", tarfile.SYMTYPE, "/etc"),
                        evil("h", tarfile.LNKTYPE, "x")):
                with self.assertRaises(pack.PackError):
                    pack.unpack_dir(self._tar(add), d)

    def test_limits(self):
        def big(t):
            ti = tarfile.TarInfo("f")
            ti.size = 1000
            t.addfile(ti, io.BytesIO(b"x" * 1000))
        with tempfile.TemporaryDirectory(prefix="pysdk_") as d:
            with self.assertRaisesRegex(pack.PackError, "limit"):
                pack.unpack_dir(self._tar(big), d, max_bytes=999)


class ClientArgs(unittest.TestCase):
    def test_validation(self):
        with tempfile.TemporaryDirectory(prefix="pysdk_") as home:
            with self.assertRaisesRegex(gpunet.UsageError, "no node to talk to"):
                gpunet.Client(keyring=home)
            with self.assertRaises(gpunet.UsageError):
                gpunet.Client(node="ftp://x", keyring=home)
            c = gpunet.Client(node="127.0.0.1:1", keyring=home, timeout=2)
            self.assertEqual(c.base, "http://127.0.0.1:1")
            with self.assertRaises(gpunet.UsageError):
                c.wait(0)
            with self.assertRaisesRegex(gpunet.UsageError, "no keys"):
                c.key()
            with self.assertRaises(gpunet.Unreachable):
                c.status()
            with self.assertRaises(gpunet.UsageError):
                c.send("gpu1x", "-1")


if __name__ == "__main__":
    unittest.main()
