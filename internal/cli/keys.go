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
}

func toKeyJSON(k *keys.Key) keyJSON {
	return keyJSON{Name: k.Name, Address: k.Address.String(), PubKey: hex.EncodeToString(k.PubKey), EncryptionKey: k.Recipient()}
}

func keysCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "keys", Short: "Manage the local keyring (under --home/keyring)"}
	c.AddCommand(&cobra.Command{
		Use:   "add NAME",
		Short: "Create a new key",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			kr, err := e.keyring()
			if err != nil {
				return err
			}
			k, err := kr.Add(args[0])
			if err != nil {
				return err
			}
			return e.print(toKeyJSON(k), func(w io.Writer) {
				fmt.Fprintf(w, "Created key %q\naddress:        %s\nencryption key: %s\nstored in:      %s (unencrypted: keep this directory private)\n", k.Name, k.Address, k.Recipient(), kr.Dir())
			})
		},
	})
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
					fmt.Fprintf(w, "No keys in %s; create one with `gpunet keys add NAME`.\n", kr.Dir())
					return
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tADDRESS")
				for _, k := range ks {
					fmt.Fprintf(tw, "%s\t%s\n", k.Name, k.Address)
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
			k, err := kr.Get(args[0])
			if err != nil {
				return err
			}
			return e.print(toKeyJSON(k), func(w io.Writer) {
				fmt.Fprintf(w, "name:           %s\naddress:        %s\npublic key:     %x\nencryption key: %s\n", k.Name, k.Address, []byte(k.PubKey), k.Recipient())
			})
		},
	})
	return c
}
