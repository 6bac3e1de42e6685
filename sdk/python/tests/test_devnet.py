"""Against a real devnet, started by the Go test TestPythonDevnet
(python_test.go), whose home ($GPUNET_HOME) holds the devnet's keys alice
and bob and an encrypted key carol. It submits the wordcount example as
carol, follows its logs, fetches the outputs and compares them with what
the Go CLI fetched ($GPUNET_TEST_GO_OUT); checks spec errors, sends SYNC,
quotes, searches offers, overrides an input and cancels a job."""

import os
import unittest

import gpunet

HOME = os.environ.get("GPUNET_TEST_DEVNET_HOME", "")


@unittest.skipUnless(HOME, "run by the Go test TestPythonDevnet (GPUNET_TEST_DEVNET_HOME)")
class Devnet(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = os.environ["GPUNET_TEST_REPO"]
        cls.out = os.environ["GPUNET_TEST_OUT"]
        cls.spec = os.path.join(cls.repo, "examples", "wordcount", "job.yaml")
        cls.c = gpunet.Client(keyring=HOME)  # the node from the home's config, as the CLI

    def test_1_wordcount_as_go(self):
        c = self.c
        self.assertTrue(c.status().chain_id)
        q = c.quote(self.spec)
        self.assertGreater(q.matching, 0, q.reason)
        uploaded = []
        job = c.submit(self.spec, key="carol", progress=lambda done, total: uploaded.append((done, total)))
        self.assertTrue(uploaded and uploaded[-1][0] == uploaded[-1][1] > 0, uploaded)
        log = b"".join(c.logs(job, follow=True))
        states = []
        j = c.wait(job, timeout=180, on_change=lambda j: states.append(j.state), check=True)
        self.assertEqual(j.state, "succeeded", j.reason)
        self.assertEqual(states[-1], "succeeded")
        got_progress = []
        files = c.outputs(job, os.path.join(self.out, "py-out"), progress=lambda d, t: got_progress.append(d))
        self.assertIn("out/counts.txt", files)
        self.assertTrue(got_progress)
        with open(os.path.join(self.out, "py-out", "out", "counts.txt"), "rb") as f:
            mine = f.read()
        with open(os.path.join(os.environ["GPUNET_TEST_GO_OUT"], "out", "counts.txt"), "rb") as f:
            theirs = f.read()
        self.assertEqual(mine, theirs)
        self.assertIn(b"top words:", mine)
        # The full log, once it is done, holds what was followed live.
        full = b"".join(c.logs(job, follow=False))
        self.assertTrue(full)
        if log:
            self.assertIn(log.strip().splitlines()[0], full)
        with open(os.path.join(self.out, "py-job-id"), "w") as f:
            f.write(str(job))

    def test_2_spec_error(self):
        bad = os.path.join(self.out, "bad.yaml")
        with open(bad, "w") as f:
            f.write("name: wordcount\nexecutor: wasm\nmodule: sha256:" + "0" * 64 +
                    "\noutputs: [/out]\nmax_price: 0.5\ntimeout: 1m\nresources:\n  cpu: 2\n  gpu: {count: 65}\n")
        with self.assertRaises(gpunet.SpecError) as cm:
            self.c.submit(bad, key="carol")
        (p,) = cm.exception.problems
        self.assertEqual((p.file, p.field, p.line, p.column), (bad, "resources.gpu.count", 9, 16))
        self.assertEqual(p.message, "65 GPUs is more than the 64 a job may ask for")

    def test_3_send_balance_offers(self):
        c = self.c
        before = c.balance("bob").balance
        res = c.send("bob", "1.5sync", key="alice")
        self.assertEqual(res.code, 0)
        self.assertGreater(res.height, 0)
        self.assertEqual(c.balance("bob").balance, before + 1_500_000)
        offers = c.offers("cpu>=1", sort="price")
        self.assertTrue(offers and all(o.cpu >= 1 for o in offers))
        with self.assertRaises(gpunet.APIError) as cm:
            c.offers("gpu=>=2")
        self.assertEqual(cm.exception.code, "invalid_argument")
        with self.assertRaises(gpunet.APIError) as cm:
            c.job(999999)
        self.assertEqual((cm.exception.code, cm.exception.status), ("not_found", 404))
        with self.assertRaises(gpunet.TxError):
            c.send("bob", 10**15, key="carol")  # more than carol holds

    def test_4_inputs_override_and_cancel(self):
        c = self.c
        mine = os.path.join(self.out, "words.txt")
        with open(mine, "w") as f:
            f.write("zebra zebra zebra yak\n")
        job = c.submit(self.spec, inputs={"/in/input.txt": mine}, key="carol")
        j = c.wait(job, timeout=180)
        self.assertEqual(j.state, "succeeded", j.reason)
        c.outputs(job, os.path.join(self.out, "py-out2"))
        with open(os.path.join(self.out, "py-out2", "out", "counts.txt")) as f:
            self.assertIn("zebra", f.read())
        with self.assertRaises(gpunet.NotOwnerError):
            c.outputs(job, os.path.join(self.out, "nope"), key="alice")
        # A job that asks for more cores than any provider has waits
        # (queue=True submits it anyway), so the cancel finds it waiting;
        # the wordcount itself could finish before the cancel lands.
        wd = os.path.dirname(self.spec)
        waiting = os.path.join(self.out, "waiting.yaml")
        with open(self.spec) as f, open(waiting, "w") as g:
            g.write(f.read().replace("./wordcount.wasm", os.path.join(wd, "wordcount.wasm"))
                    .replace("./input.txt", os.path.join(wd, "input.txt")).replace("cpu: 1", "cpu: 512"))
        job = c.submit(waiting, key="carol", queue=True)
        j = c.cancel(job)
        self.assertEqual(j.state, "cancelled")
        with self.assertRaises(gpunet.Error):
            c.cancel(job)


if __name__ == "__main__":
    unittest.main()
