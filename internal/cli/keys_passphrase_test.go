package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/keys"
)

// TestPassphraseFromSystemdCredential: under systemd, a unit's
// LoadCredential=keyring-passphrase:FILE puts the passphrase in
// $CREDENTIALS_DIRECTORY/keyring-passphrase, and the CLI reads it there
// when neither --keyring-passphrase-file nor $GPUNET_KEYRING_PASSPHRASE
// gives one (deploy/systemd/gpunet-provider.service relies on it). Each
// case creates a key and then decrypts it with the passphrase that should
// have been used, and fails to with the others.
func TestPassphraseFromSystemdCredential(t *testing.T) {
	ttyPath = filepath.Join(t.TempDir(), "no-tty") // never prompt the developer's terminal
	t.Setenv(keys.InsecureTestKeyringEnv, "1")     // decrypting below takes a millisecond, not a second
	write := func(t *testing.T, path, data string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name       string
		credential string // the credential file's content; "-": no file
		env        string // $GPUNET_KEYRING_PASSPHRASE
		flagFile   string // --keyring-passphrase-file's content; "": no flag
		want       string // the passphrase the key must be encrypted with
		wantErr    string // or the error keys add must end with
	}{
		{name: "credential", credential: "from systemd\n", want: "from systemd"},
		{name: "credential CRLF", credential: "from systemd\r\nignored\n", want: "from systemd"},
		{name: "env first", credential: "from systemd\n", env: "from env", want: "from env"},
		{name: "flag first", credential: "from systemd\n", env: "from env", flagFile: "from flag\n", want: "from flag"},
		{name: "empty credential", credential: "\n", wantErr: "the systemd credential keyring-passphrase"},
		{name: "no credential", credential: "-", wantErr: "LoadCredential=keyring-passphrase:FILE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			home, creds := t.TempDir(), t.TempDir()
			t.Setenv("CREDENTIALS_DIRECTORY", creds)
			t.Setenv(keys.PassphraseEnv, c.env)
			if c.credential != "-" {
				write(t, filepath.Join(creds, PassphraseCredential), c.credential)
			}
			args := []string{"keys", "add", "carol", "--home", home}
			if c.flagFile != "" {
				f := filepath.Join(t.TempDir(), "pass")
				write(t, f, c.flagFile)
				args = append(args, "--keyring-passphrase-file", f)
			}
			code, _, errOut := gpunetRun(t, args...)
			if c.wantErr != "" {
				if code != ExitError || !strings.Contains(errOut, c.wantErr) {
					t.Fatalf("keys add: exit %d, %q; want exit %d with %q", code, errOut, ExitError, c.wantErr)
				}
				return
			}
			if code != 0 {
				t.Fatalf("keys add: exit %d: %s", code, errOut)
			}
			kr, err := keys.Open(filepath.Join(home, "keyring"))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"from systemd", "from env", "from flag"} {
				t.Setenv(keys.PassphraseEnv, p)
				_, err := kr.Get("carol")
				if got, want := err == nil, p == c.want; got != want {
					t.Errorf("decrypting with %q: err %v; want it to work only with %q", p, err, c.want)
				}
			}
		})
	}
}
