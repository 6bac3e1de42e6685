package cli

import (
	"encoding/hex"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/keys"
)

// keyJSON is the stable JSON of a key (DESIGN.md section 7).
type keyJSON struct {
	Name          string `json:"name"`
	Address       string `json:"address"`
	PubKey        string `json:"pub_key"`
	EncryptionKey string `json:"encryption_key"`
	// Encrypted tells whether the private key is stored encrypted with a
	// passphrase.
	Encrypted bool `json:"encrypted"`
}

func toKeyJSON(k *keys.Key) keyJSON {
	return keyJSON{Name: k.Name, Address: k.Address.String(), PubKey: hex.EncodeToString(k.PubKey), EncryptionKey: k.Recipient(), Encrypted: k.Encrypted()}
}

// storage says how a key is stored, for text output.
func storage(k *keys.Key) string {
	if k.Encrypted() {
		return "encrypted with its passphrase"
	}
	return "unencrypted: anyone who can read the file can use the key"
}

func keysCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "keys", Short: "Manage the local keyring (under --home/keyring)"}
	var unencrypted bool
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Create a new key, encrypted with a passphrase",
		Long: `Create a new key. Its private half is encrypted with a passphrase: the
first line of --keyring-passphrase-file, else $GPUNET_KEYRING_PASSPHRASE,
else one asked on the terminal (twice). Commands that sign with the key
ask for it the same way. --unencrypted stores it in the clear instead (as
a devnet stores its own test keys), protected only by file permissions.`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			kr, err := e.keyring()
			if err != nil {
				return err
			}
			var k *keys.Key
			if unencrypted {
				k, err = kr.AddUnencrypted(args[0])
			} else {
				k, err = kr.Add(args[0])
			}
			if err != nil {
				return err
			}
			return e.print(toKeyJSON(k), func(w io.Writer) {
				fmt.Fprintf(w, "Created key %q\naddress:        %s\nencryption key: %s\nstored in:      %s (%s)\n", k.Name, k.Address, k.Recipient(), kr.Dir(), storage(k))
			})
		},
	}
	add.Flags().BoolVar(&unencrypted, "unencrypted", false, "store the private key unencrypted (no passphrase)")
	c.AddCommand(add)
	c.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the keys",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			kr, err := e.keyring()
			if err != nil {
				return err
			}
			ks, err := kr.List()
			if err != nil {
				return err
			}
			out := make([]keyJSON, 0, len(ks))
			for _, k := range ks {
				out = append(out, toKeyJSON(k))
			}
			return e.print(out, func(w io.Writer) {
				if len(ks) == 0 {
					fmt.Fprintf(w, "No keys in %s; create one with `%s`.\n", kr.Dir(), hint("keys add NAME"))
					return
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tADDRESS\tENCRYPTED")
				for _, k := range ks {
					enc := "no"
					if k.Encrypted() {
						enc = "yes"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", k.Name, k.Address, enc)
				}
				tw.Flush()
			})
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "show NAME",
		Short: "Show a key's address and public keys",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			kr, err := e.keyring()
			if err != nil {
				return err
			}
			k, err := kr.Lookup(args[0]) // public: no passphrase
			if err != nil {
				return err
			}
			return e.print(toKeyJSON(k), func(w io.Writer) {
				fmt.Fprintf(w, "name:           %s\naddress:        %s\npublic key:     %x\nencryption key: %s\nstored:         %s\n", k.Name, k.Address, []byte(k.PubKey), k.Recipient(), storage(k))
			})
		},
	})
	return c
}
