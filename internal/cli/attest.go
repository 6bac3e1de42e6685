package cli

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/attest"
)

func attestCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "attest", Short: "Confidential computing: verify TEE evidence offline (docs/confidential.md)"}
	c.AddCommand(attestVerifyCmd(e))
	return c
}

// attestResult is `attest verify`'s JSON: the claims when verified, the
// reason when not.
type attestResult struct {
	Verified bool           `json:"verified"`
	File     string         `json:"file"`
	Kind     attest.Kind    `json:"kind,omitempty"`
	At       time.Time      `json:"at"`
	Reason   attest.Reason  `json:"reason,omitempty"`
	Error    string         `json:"error,omitempty"`
	Claims   *attest.Claims `json:"claims,omitempty"`
	// ReportedUUID and ReportedCC are what an NVIDIA bundle says NVML
	// reported: not signed by the GPU.
	ReportedUUID string             `json:"reported_uuid,omitempty"`
	ReportedCC   *attest.GPUCCState `json:"reported_cc_state,omitempty"`
}

// notVerifiedError is the error of evidence that did not verify; with -o
// json its result is already on stdout.
type notVerifiedError struct{ err error }

func (n notVerifiedError) Error() string { return "not verified: " + n.err.Error() }
func (n notVerifiedError) Unwrap() error { return n.err }

func attestVerifyCmd(e *env) *cobra.Command {
	var (
		kind, collateral, at, nonceHex, key string
		roots                               []string
		minEval                             int
		minSNP                              string
		allowDebug, allowMissingCRL         bool
	)
	c := &cobra.Command{
		Use:   "verify FILE",
		Short: "Verify a TDX quote, an SEV-SNP report or NVIDIA GPU evidence offline, with the vendor collateral in a directory",
		Long: `Verify TEE evidence offline, as a validator does: nothing is fetched.

FILE is the raw evidence: a TDX quote (v4), an SEV-SNP attestation report
(1184 bytes, without the certificate table), or an NVIDIA GPU evidence
bundle: JSON {"kind": "nvidia-gpu", "report": HEX, "cert_chain": PEM}, the
report as NVML's nvmlDeviceGetConfComputeGpuAttestationReport returns it
(an SPDM GET_MEASUREMENTS request and the GPU's signed response) and the
chain as nvmlDeviceGetConfComputeGpuCertificate does (AK certificate
first); optional "uuid" and "cc_state" are what NVML reported, shown but
not signed. Its kind is told from its bytes, or named with --kind.

--collateral DIR holds the vendor collateral as the vendor's services
return it:
  TDX (Intel PCS): tcb_info.json, tcb_info_issuer_chain.pem,
    qe_identity.json, qe_identity_issuer_chain.pem, pck_crl.der,
    pck_crl_issuer_chain.pem, root_ca_crl.der (the *_issuer_chain.pem files
    are the answers' *-Issuer-Chain headers, URL-encoded or plain PEM)
  SEV-SNP (AMD KDS): vcek.der, cert_chain.pem (ASK, ARK), crl.der
  NVIDIA GPU: none (the bundle carries its chain)

--at verifies at that instant (RFC 3339), as the ledger does at block
time; the default is now. --nonce HEX and --key KEY check that the report
data binds them: SHA-512("gpunet-attest-v1" || len(nonce) || nonce ||
len(key) || key), lengths 4-byte big-endian, KEY as its text; an NVIDIA
GPU's 32-byte SPDM nonce binds its first 32 bytes. Without --nonce the
binding is not checked.

The roots of trust are the vendors' published ones (the Intel SGX Root CA,
the AMD ARKs of Milan, Genoa and Turin, NVIDIA's Device Identity CA)
unless --roots names others.

It prints what the evidence proves (vendor, TEE, measurements, TCB,
report data and binding, chip, until when) or why not, and exits 1 when
not verified.`,
		Args: exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			res := attestResult{File: args[0]}
			var k attest.Kind
			if kind != "" {
				if k, err = attest.ParseKind(kind); err != nil {
					return usageError{err}
				}
			} else if k, err = attest.DetectKind(raw); err != nil {
				return e.attestRefused(res, err)
			}
			res.Kind = k
			opts := attest.Options{AllowDebug: allowDebug, AllowMissingCRL: allowMissingCRL, MinTCB: map[attest.Kind]attest.MinTCB{}}
			if at == "" {
				opts.Now = time.Now().UTC()
			} else if opts.Now, err = time.Parse(time.RFC3339, at); err != nil {
				return usageError{fmt.Errorf("--at %q: want an RFC 3339 time, e.g. 2023-07-01T00:00:00Z", at)}
			}
			res.At = opts.Now
			if nonceHex == "" {
				opts.SkipBinding = true
				if key != "" {
					return usageError{errors.New("--key needs --nonce: the binding is of both")}
				}
			} else if opts.Nonce, err = hex.DecodeString(nonceHex); err != nil {
				return usageError{fmt.Errorf("--nonce: want hex: %v", err)}
			}
			opts.Key = []byte(key)
			if len(roots) == 0 {
				opts.TrustedRoots = attest.DefaultRoots()
			}
			for _, r := range roots {
				b, err := os.ReadFile(r)
				if err != nil {
					return err
				}
				opts.TrustedRoots = append(opts.TrustedRoots, b)
			}
			opts.MinTCB[attest.KindTDX] = attest.MinTCB{TCBEvaluationDataNumber: minEval}
			if minSNP != "" {
				m, err := parseSNPMin(minSNP)
				if err != nil {
					return usageError{err}
				}
				opts.MinTCB[attest.KindSEVSNP] = m
			}
			ev := attest.Evidence{Kind: k, Raw: raw, Collateral: map[string][]byte{}}
			var bundle *attest.GPUBundle
			if k == attest.KindNVIDIAGPU {
				if ev, bundle, err = attest.ParseGPUBundle(raw); err != nil {
					return e.attestRefused(res, err)
				}
				if collateral != "" {
					return usageError{errors.New("--collateral: an NVIDIA GPU evidence bundle carries its certificate chain")}
				}
			}
			if collateral != "" {
				st, err := os.Stat(collateral)
				if err != nil {
					return err
				}
				if !st.IsDir() {
					return usageError{fmt.Errorf("--collateral %s is not a directory", collateral)}
				}
				for _, n := range attest.CollateralNames(k) {
					b, err := os.ReadFile(filepath.Join(collateral, n))
					if errors.Is(err, os.ErrNotExist) {
						continue
					}
					if err != nil {
						return err
					}
					ev.Collateral[n] = b
				}
			}
			claims, err := attest.Verify(ev, opts)
			if err != nil {
				return e.attestRefused(res, err)
			}
			res.Verified, res.Claims = true, claims
			if bundle != nil {
				res.ReportedUUID, res.ReportedCC = bundle.UUID, bundle.CCState
			}
			return e.print(res, func(w io.Writer) { printClaims(w, res) })
		},
	}
	f := c.Flags()
	f.StringVar(&kind, "kind", "", "evidence kind: tdx, sev-snp or nvidia-gpu (default: told from the bytes)")
	f.StringVar(&collateral, "collateral", "", "directory of vendor collateral (see above)")
	f.StringVar(&at, "at", "", "verify at this instant, RFC 3339 (default: now)")
	f.StringVar(&nonceHex, "nonce", "", "the chain nonce (hex) the report data must bind")
	f.StringVar(&key, "key", "", "the agent's job-encryption public key (its text) the report data must bind with --nonce")
	f.StringArrayVar(&roots, "roots", nil, "a trusted root certificate file, PEM or DER (repeatable; default: the vendors' published roots)")
	f.IntVar(&minEval, "min-tdx-tcb-eval", 0, "TDX: the minimum TCB evaluation data number of the TCB info and QE identity")
	f.StringVar(&minSNP, "min-snp-tcb", "", "SEV-SNP: the minimum REPORTED_TCB as BOOTLOADER,TEE,SNP,MICROCODE security patch levels, e.g. 3,0,8,115")
	f.BoolVar(&allowDebug, "allow-debug", false, "accept a debuggable guest (its host can read its memory)")
	f.BoolVar(&allowMissingCRL, "allow-missing-crl", false, "SEV-SNP: accept collateral without crl.der (revocation then is not checked)")
	return c
}

func parseSNPMin(s string) (attest.MinTCB, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 4 {
		return attest.MinTCB{}, fmt.Errorf("--min-snp-tcb %q: want BOOTLOADER,TEE,SNP,MICROCODE", s)
	}
	var v [4]uint8
	for i, p := range parts {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 8)
		if err != nil {
			return attest.MinTCB{}, fmt.Errorf("--min-snp-tcb %q: %v", s, err)
		}
		v[i] = uint8(n)
	}
	return attest.MinTCB{BootloaderSPL: v[0], TEESPL: v[1], SNPSPL: v[2], MicrocodeSPL: v[3]}, nil
}

// attestRefused reports evidence that did not verify: with -o json its
// result on stdout; the error (exit 1) either way.
func (e *env) attestRefused(res attestResult, err error) error {
	res.Reason, res.Error = attest.ReasonOf(err), err.Error()
	if e.output == "json" {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.Encode(res)
	}
	return notVerifiedError{err}
}

func printClaims(w io.Writer, res attestResult) {
	c := res.Claims
	fmt.Fprintf(w, "verified: %s %s evidence (%s)\n", c.Vendor, c.TEE, res.File)
	fmt.Fprintf(w, "vendor:        %s\n", c.Vendor)
	fmt.Fprintf(w, "tee:           %s\n", c.TEE)
	fmt.Fprintf(w, "platform:      %s\n", c.Platform)
	fmt.Fprintf(w, "chip:          %s\n", c.ChipID)
	for i, m := range c.Measurements {
		label := ""
		if i == 0 {
			label = "measurements:"
		}
		fmt.Fprintf(w, "%-14s %-11s %s\n", label, m.Name, m.Hex)
	}
	fmt.Fprintf(w, "tcb:           %s (%s)\n", c.TCBStatus, c.TCB)
	if g := c.GPU; g != nil {
		printGPUClaims(w, res)
		return
	}
	debug := "no"
	if c.Debug {
		debug = "YES: the host can read the guest's memory (--allow-debug)"
	}
	fmt.Fprintf(w, "debug:         %s\n", debug)
	rev := "checked against the vendor CRLs"
	if !c.RevocationChecked {
		rev = "NOT checked (no CRL; --allow-missing-crl)"
	}
	fmt.Fprintf(w, "revocation:    %s\n", rev)
	fmt.Fprintf(w, "report data:   %s\n", c.ReportData)
	if c.BindingChecked {
		fmt.Fprintf(w, "binding:       binds nonce %s and key %q\n", c.Nonce, string(mustHex(c.Key)))
	} else {
		fmt.Fprintf(w, "binding:       not checked (no --nonce)\n")
	}
	fmt.Fprintf(w, "valid until:   %s (the earliest expiry of its certificates and collateral)\n", c.Expiry.Format(time.RFC3339))
	fmt.Fprintf(w, "verified at:   %s\n", res.At.UTC().Format(time.RFC3339))
}

// printGPUClaims ends printClaims for NVIDIA GPU evidence.
func printGPUClaims(w io.Writer, res attestResult) {
	c, g := res.Claims, res.Claims.GPU
	fmt.Fprintf(w, "gpu identity:  %s (DeviceID certificate serial, %s)\n", g.ID, g.Model)
	fmt.Fprintf(w, "ueid:          %s (the AK certificate's serial)\n", g.UEID)
	if g.DeviceName != "" {
		fmt.Fprintf(w, "device name:   %s\n", g.DeviceName)
	}
	fmt.Fprintf(w, "driver:        %s\n", g.DriverVersion)
	fmt.Fprintf(w, "vbios:         %s\n", g.VBIOSVersion)
	fmt.Fprintf(w, "board:         %s, chip SKU %s, project %s-%s\n", g.BoardID, g.ChipSKU, g.Project, g.ProjectSKU)
	if g.FWID != "" {
		fmt.Fprintf(w, "fwid:          %s (matches the AK certificate)\n", g.FWID)
	}
	if g.FeatureFlag != "" {
		fmt.Fprintf(w, "multi-gpu:     %s\n", g.FeatureFlag)
	}
	fmt.Fprintf(w, "blocks:        %d measurement blocks (MEASUREMENTS is SHA-384 of their record)\n", g.Blocks)
	if cc := res.ReportedCC; cc != nil {
		fmt.Fprintf(w, "cc (reported): feature %d, devtools %d, environment %d (what NVML said; not signed)\n", cc.CCFeature, cc.DevToolsMode, cc.Environment)
	}
	if res.ReportedUUID != "" {
		fmt.Fprintf(w, "uuid (reported): %s (not signed)\n", res.ReportedUUID)
	}
	fmt.Fprintf(w, "revocation:    NOT checked (NVIDIA's OCSP is not consulted offline)\n")
	fmt.Fprintf(w, "spdm nonce:    %s\n", c.ReportData)
	if c.BindingChecked {
		fmt.Fprintf(w, "binding:       binds nonce %s and key %q\n", c.Nonce, string(mustHex(c.Key)))
	} else {
		fmt.Fprintf(w, "binding:       not checked (no --nonce)\n")
	}
	fmt.Fprintf(w, "valid until:   %s (the earliest expiry of its certificates)\n", c.Expiry.Format(time.RFC3339))
	fmt.Fprintf(w, "verified at:   %s\n", res.At.UTC().Format(time.RFC3339))
}

func mustHex(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}
