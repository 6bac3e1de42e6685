"""Cross-language vectors: the Go test (python_test.go) writes what the Go
code makes — signed txs, sealed blobs, key files, spec errors — into
$GPUNET_VECTORS; this checks the Python package makes and reads the same,
and writes what it seals for the Go test to open."""

import base64
import json
import os
import unittest

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import gpunet
from gpunet import age, jobspec, pack, tx

DIR = os.environ.get("GPUNET_VECTORS", "")


@unittest.skipUnless(DIR, "run by the Go test TestCrossLanguageVectors (GPUNET_VECTORS)")
class Vectors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(DIR, "vectors.json")) as f:
            cls.v = json.load(f)

    def msg(self, c):
        p = c["params"]
        n = c["name"]
        if n == "send":
            return tx.msg_send(p["to"], p["amount"])
        if n == "cancel_job":
            return tx.msg_cancel_job(p["job_id"])
        if n == "grant_key":
            return tx.msg_grant_key(p["job_id"], [(p["provider"], bytes.fromhex(p["wrapped_key"]))])
        if n.startswith("submit_"):
            s = jobspec.load_spec(p["spec"])
            return tx.msg_submit_job(s.ledger_spec(p["module"]), p["consumer_key"], p["input_blob"],
                                     tx.job_key_commitment(p["job_key"]), p["data_at"])
        if n == "deploy_service":
            s = jobspec.load_spec(p["spec"])
            return tx.msg_deploy_service(s.service_spec(), s.budget, p["consumer_key"], s.public,
                                         [tx.service_key_hash(p["access_key"])])
        if n == "stop_service":
            return tx.msg_stop_service(p["service_id"])
        if n == "scale_service":
            return tx.msg_scale_service(p["service_id"], p["replicas"])
        if n == "top_up_service":
            return tx.msg_top_up_service(p["service_id"], p["amount"])
        if n == "set_service_access":
            return tx.msg_set_service_access(p["service_id"], p["public"])
        self.fail(f"unknown case {n}")

    def test_txs_byte_identical(self):
        priv = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(self.v["seed"]))
        for c in self.v["txs"]:
            with self.subTest(c["name"]):
                t = tx.Tx(self.v["chain_id"], self.v["sequence"], self.v["fee"], self.msg(c)).sign(priv)
                self.assertEqual(t.body().decode(), c["body"])
                self.assertEqual(t.sign_bytes().hex(), c["sign_bytes"])
                self.assertEqual(t.encode().hex(), c["encoded"])
        self.assertEqual(tx.address_from_pubkey(priv.public_key().public_bytes_raw()
                                                if hasattr(priv.public_key(), "public_bytes_raw") else
                                                t.pubkey), self.v["address"])

    def test_spec_errors_as_go(self):
        for c in self.v["specs"]:
            with self.subTest(c["name"]):
                with self.assertRaises(gpunet.SpecError) as cm:
                    jobspec.parse_spec(c["yaml"], DIR)
                got = [{"field": p.field, "line": p.line, "column": p.column, "message": p.message}
                       for p in cm.exception.problems]
                if c["name"] == "yaml":
                    # YAML syntax errors: the parsers word them differently;
                    # both say where.
                    self.assertEqual(len(got), 1)
                    self.assertTrue(got[0]["message"].startswith("invalid YAML"), got)
                    self.assertGreater(got[0]["line"], 0)
                    continue
                self.assertEqual(got, c["problems"])

    def test_key_files(self):
        kr = gpunet.Keyring(os.path.join(DIR, "home"), passphrase=self.v["passphrase"])
        for name, kv in self.v["keys"].items():
            with self.subTest(name):
                looked = kr.lookup(name)
                self.assertEqual(looked.encrypted, kv["encrypted"])
                self.assertEqual(looked.locked, kv["encrypted"])
                k = kr.get(name)
                self.assertEqual(k.address, kv["address"])
                self.assertEqual(k.public_key.hex(), kv["public_key"])
                self.assertEqual(k.recipient, kv["recipient"])
                self.assertEqual(k.sign(bytes.fromhex(kv["message"])).hex(), kv["signature"])
        with self.assertRaises(gpunet.WrongPassphrase):
            gpunet.Keyring(os.path.join(DIR, "home"), passphrase="wrong").get("carol")
        os.environ.pop("GPUNET_KEYRING_PASSPHRASE", None)
        with self.assertRaises(gpunet.NoPassphrase):
            gpunet.Keyring(os.path.join(DIR, "home")).get("carol")
        pf = os.path.join(DIR, "passfile")
        with open(pf, "w") as f:
            f.write(self.v["passphrase"] + "\r\nignored\n")
        self.assertEqual(gpunet.Keyring(os.path.join(DIR, "home"), passphrase_file=pf).get("carol").address,
                         self.v["keys"]["carol"]["address"])
        os.environ["GPUNET_KEYRING_PASSPHRASE"] = self.v["passphrase"]
        try:
            self.assertFalse(gpunet.Keyring(os.path.join(DIR, "home")).get("carol").locked)
        finally:
            os.environ.pop("GPUNET_KEYRING_PASSPHRASE")
        self.assertEqual([k.name for k in kr.list()], ["carol", "dev.key-1"])
        with self.assertRaises(gpunet.KeyNotFound):
            kr.lookup("nobody")
        with self.assertRaises(gpunet.UsageError):
            kr.lookup("Bad Name")

    def test_go_sealed_opens_here(self):
        ident = age.X25519Identity.parse(self.v["py_identity"])
        for name in self.v["plaintexts"]:
            with self.subTest(name):
                with open(os.path.join(DIR, "go", name + ".age"), "rb") as f:
                    got = age.decrypt(f, [ident])
                with open(os.path.join(DIR, "go", name + ".plain"), "rb") as f:
                    self.assertEqual(got, f.read())
        with open(os.path.join(DIR, "go", "wrapped.key"), "rb") as f:
            self.assertEqual(age.decrypt(f.read(), [ident]).decode().strip(), self.v["job_key"])
        # A provider's packed, sealed outputs unpack here.
        out = os.path.join(DIR, "py-outputs")
        with open(os.path.join(DIR, "go", "outputs.age"), "rb") as f:
            files = pack.unpack_dir(gpunet.client._IterReader(age.decrypt_stream(f, [ident])), out)
        self.assertEqual(sorted(files), ["out/a.txt", "out/counts.txt", "out/sub/run.sh"])
        with open(os.path.join(out, "out", "counts.txt")) as f:
            self.assertEqual(f.read(), "top words:\n  the 3\n")
        self.assertTrue(os.stat(os.path.join(out, "out", "sub", "run.sh")).st_mode & 0o100)
        # Tampering is caught.
        with open(os.path.join(DIR, "go", "big.age"), "rb") as f:
            ct = bytearray(f.read())
        ct[-100] ^= 1
        with self.assertRaises(age.AgeError):
            age.decrypt(bytes(ct), [ident])
        with self.assertRaises(age.NoIdentityMatch):
            age.decrypt(open(os.path.join(DIR, "go", "small.age"), "rb").read(), [age.X25519Identity.generate()])

    def test_seal_for_go(self):
        rcpt = age.X25519Recipient.parse(self.v["go_recipient"])
        os.makedirs(os.path.join(DIR, "py"), exist_ok=True)
        for name in self.v["plaintexts"]:
            with open(os.path.join(DIR, "go", name + ".plain"), "rb") as f:
                plain = f.read()
            with open(os.path.join(DIR, "py", name + ".age"), "wb") as f:
                w = age.EncryptWriter(f, [rcpt])
                # Written in odd pieces: chunking must not depend on them.
                for i in range(0, len(plain), 7777):
                    w.write(plain[i:i + 7777])
                w.close()
        with open(os.path.join(DIR, "py", "wrapped.key"), "wb") as f:
            f.write(age.encrypt(self.v["job_key"].encode(), [rcpt]))
        tree = os.path.join(DIR, "pytree")
        os.makedirs(os.path.join(tree, "data", "deep"), exist_ok=True)
        for p, content in {"input.txt": b"one two two\n", "data/x.txt": b"x\n", "data/deep/y.bin": b"\x00y"}.items():
            with open(os.path.join(tree, p), "wb") as f:
                f.write(content)
        files = {"/in/input.txt": os.path.join(tree, "input.txt"), "/in/data": os.path.join(tree, "data")}
        with open(os.path.join(DIR, "py", "inputs.tar"), "wb") as f:
            pack.pack_files(f, files)
        with open(os.path.join(DIR, "py", "inputs.age"), "wb") as f:
            w = age.EncryptWriter(f, [rcpt])
            pack.pack_files(w, files)
            w.close()


if __name__ == "__main__":
    unittest.main()
