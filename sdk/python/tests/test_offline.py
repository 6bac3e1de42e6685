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
        self.assertEqual(units.parse_amount("1500"), 1500)
        self.assertEqual(units.format_bytes(3 << 30), "3GiB")
        self.assertEqual(units.format_duration(36 * units.HOUR), "36h")
        for bad in ("0", "-5", "1.5usync", "x", "1e3"):
            with self.assertRaises(ValueError):
                units.parse_amount(bad)
        with self.assertRaisesRegex(ValueError, "ambiguous"):
            units.parse_bytes("10M")
        with self.assertRaisesRegex(ValueError, "no unit"):
            units.parse_duration("600")


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
