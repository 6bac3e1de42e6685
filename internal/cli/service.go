package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/ledger"
)

// serviceCmd is `gpunet service`: deploy and run long-running services
// (jobspec kind: service; docs/jobspec.md, Services).
func serviceCmd(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "service",
		Short: "Deploy and manage long-running services: ports relayed by every node, replicas paid per second from a budget",
		Long: `A service is a container with ports (a spec with kind: service) that runs
until you stop it or its budget runs out. Its replicas are placed on providers
like jobs; each is paid per second from its first ready report. Every node
relays its http ports at {node}/svc/{id}/{port}/, a byte stream to any port
(gpunet service connect), and, for a service that declares openai, serves it
at {node}/openai/v1. A private service (the default) needs one of its access
keys: Authorization: Bearer sk-gpunet-… or X-Gpunet-Key: sk-gpunet-….`,
	}
	c.AddCommand(serviceDeployCmd(e), serviceQuoteCmd(e), serviceListCmd(e), serviceStatusCmd(e), serviceLogsCmd(e),
		serviceScaleCmd(e), serviceTopUpCmd(e), serviceStopCmd(e), serviceAccessCmd(e),
		serviceEvictCmd(e), serviceKeyCmd(e), serviceConnectCmd(e), serviceProbeCmd(e), serviceReceiptCmd(e))
	return c
}

// loadServiceSpec reads the spec at path, or from stdin when path is "-".
func loadServiceSpec(cmd *cobra.Command, path string) (*jobspec.Spec, error) {
	var s *jobspec.Spec
	var err error
	if path == "-" {
		s, err = jobspec.LoadFrom(cmd.InOrStdin(), "<stdin>", ".")
	} else {
		s, err = jobspec.Load(path)
	}
	if err != nil {
		return nil, usageError{err}
	}
	return s, nil
}

// serviceArg reads, through the node, the service that arg names.
func (e *env) serviceArg(ctx context.Context, arg string) (*chainclient.Client, *ledger.Service, error) {
	id, err := parseServiceID(arg)
	if err != nil {
		return nil, nil, err
	}
	cl, err := e.client()
	if err != nil {
		return nil, nil, err
	}
	s, err := cl.Service(ctx, id)
	return cl, s, err
}

func parseServiceID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, usageError{fmt.Errorf("service id %q: want a positive integer", s)}
	}
	return id, nil
}

// deployResult is service deploy's JSON.
type deployResult struct {
	*apiwire.TxResult
	ID uint64 `json:"id"`
	// AccessKey is the service's access key (empty for a public service);
	// KeyFile is where this home keeps it, from which service key prints
	// it again.
	AccessKey string           `json:"access_key,omitempty"`
	KeyFile   string           `json:"key_file,omitempty"`
	Addresses serviceAddresses `json:"addresses"`
}

// serviceAddresses are where a service is reached through a node.
type serviceAddresses struct {
	Ports []portAddress `json:"ports"`
	// OpenAI is the base URL of the node's OpenAI-compatible API, for a
	// service that declares openai.
	OpenAI string   `json:"openai,omitempty"`
	Models []string `json:"models,omitempty"`
}

// portAddress is one port's address: an http port's URL, or for a tcp
// port the node's /svc path that gpunet service connect opens.
type portAddress struct {
	Port     uint64 `json:"port"`
	Name     string `json:"name,omitempty"`
	Protocol string `json:"protocol"`
	URL      string `json:"url"`
}

// addressesOf is where spec's ports are at node.
func addressesOf(node string, id uint64, spec *ledger.ServiceSpec) serviceAddresses {
	a := serviceAddresses{Ports: []portAddress{}}
	for _, p := range spec.Ports {
		a.Ports = append(a.Ports, portAddress{Port: p.Port, Name: p.Name, Protocol: p.Protocol, URL: fmt.Sprintf("%s/svc/%d/%d/", node, id, p.Port)})
	}
	if spec.OpenAI != nil {
		a.OpenAI = node + "/openai/v1"
		a.Models = spec.OpenAI.Models
	}
	return a
}

// printKeyKept says where service id's access key is kept, and how to
// print it again; or, when it could not be kept (file ""), that it must be
// copied now.
func printKeyKept(w io.Writer, id uint64, file string) {
	if file == "" {
		fmt.Fprintf(w, "  not kept in this home: copy it now (the chain holds only its SHA-256)\n")
		return
	}
	fmt.Fprintf(w, "  kept in %s; %s prints it again (the chain holds only its SHA-256)\n", file, hint(fmt.Sprintf("service key %d", id)))
}

func printAddresses(w io.Writer, id uint64, a serviceAddresses) {
	for _, p := range a.Ports {
		label := strconv.FormatUint(p.Port, 10)
		if p.Name != "" {
			label = p.Name + " " + label
		}
		if p.Protocol == ledger.PortTCP {
			fmt.Fprintf(w, "  %s/tcp: %s\n", label, hint(fmt.Sprintf("service connect %d --port %d", id, p.Port)))
			continue
		}
		fmt.Fprintf(w, "  %s/http: %s\n", label, p.URL)
	}
	if a.OpenAI != "" {
		fmt.Fprintf(w, "  openai: %s (models: %v)\n", a.OpenAI, a.Models)
	}
}

// serviceOverrides are the flags deploy and quote take over the spec's
// fields.
type serviceOverrides struct {
	replicas int
	budget   string
	public   bool
}

func (o *serviceOverrides) flags(cmd *cobra.Command, public bool) {
	cmd.Flags().IntVar(&o.replicas, "replicas", 0, "how many replicas (overrides the spec's replicas)")
	cmd.Flags().StringVar(&o.budget, "budget", "", "the budget to lock, e.g. 5sync or 5000000usync (overrides the spec's budget)")
	if public {
		cmd.Flags().BoolVar(&o.public, "public", false, "anyone may reach the service, without a key (overrides public: false)")
	}
}

// load reads the service spec at path (- for stdin) and applies the
// overrides; the spec must be a service's.
func (o *serviceOverrides) load(cmd *cobra.Command, path string) (*jobspec.Spec, error) {
	s, err := loadServiceSpec(cmd, path)
	if err != nil {
		return nil, err
	}
	if !s.IsService() {
		return nil, usageError{fmt.Errorf("%s is a batch job spec (kind: %s): add kind: service to deploy it as a service, or run it with %s", path, s.Kind, hint("job run "+path))}
	}
	if cmd.Flags().Changed("replicas") {
		if o.replicas < 1 || o.replicas > jobspec.MaxReplicas {
			return nil, usageError{fmt.Errorf("--replicas %d: want 1 to %d", o.replicas, jobspec.MaxReplicas)}
		}
		s.Replicas = o.replicas
	}
	if o.budget != "" {
		amt, err := parseAmount(o.budget)
		if err != nil {
			return nil, usageError{fmt.Errorf("--budget: %w", err)}
		}
		s.Budget = jobspec.Amount(amt)
	}
	if o.public {
		s.Public = true
	}
	if err := s.Validate(); err != nil {
		return nil, usageError{err}
	}
	return s, nil
}

func serviceDeployCmd(e *env) *cobra.Command {
	var from string
	var over serviceOverrides
	deploy := &cobra.Command{
		Use:   "deploy SPEC.yaml|- [--from KEY] [--replicas N] [--budget AMOUNT] [--public]",
		Short: "Deploy a service (a spec with kind: service), locking its budget in escrow; prints its id, addresses and access key",
		Long: `Deploy a service from its spec (kind: service), locking its budget in escrow.
--replicas and --budget override the spec's; --public (or public: true in the
spec) opens it to anyone. A private service gets an access key,
sk-gpunet-<43 characters>, printed and kept in HOME/services/ID.key, from
which gpunet service key ID prints it again; the chain holds only its
SHA-256, so a key this home loses is lost (service access ID --new-key
replaces it).
The replicas' logs are sealed to the deploying key (gpunet service logs).`,
		Args: exactArgs("SPEC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := over.load(cmd, args[0])
			if err != nil {
				return err
			}
			name, err := e.signer(from)
			if err != nil {
				return err
			}
			kr, err := e.keyring()
			if err != nil {
				return err
			}
			key, err := kr.Get(name)
			if err != nil {
				return err
			}
			msg := &ledger.MsgDeployService{Spec: s.ServiceSpec(), Budget: uint64(s.Budget), ConsumerKey: key.Recipient(), Public: s.Public}
			var access string
			if !s.Public {
				if access, err = newAccessKey(); err != nil {
					return err
				}
				msg.KeyHashes = []ledger.Hash{serviceKeyHash(access)}
			}
			res, _, err := e.signAndSend(cmd, name, 0, msg)
			if err != nil {
				return err
			}
			id := eventUint(res.Events, "service_deployed", "service")
			if id == 0 {
				return fmt.Errorf("tx %s has no service_deployed event", res.Hash)
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			out := deployResult{TxResult: res, ID: id, AccessKey: access, Addresses: addressesOf(cl.Base(), id, &msg.Spec)}
			var saveErr error
			if access != "" {
				out.KeyFile, saveErr = e.saveServiceKey(id, access)
			}
			err = e.print(out, func(w io.Writer) {
				fmt.Fprintf(w, "service %d deployed (%q, %d replica(s), budget %s)\n", id, s.Name, s.Replicas, formatAmount(uint64(s.Budget)))
				printTxResult(w, res)
				if access != "" {
					fmt.Fprintf(w, "access key: %s\n", access)
					printKeyKept(w, id, out.KeyFile)
					fmt.Fprintf(w, "  send it as Authorization: Bearer <key> or X-Gpunet-Key: <key>\n")
				} else {
					fmt.Fprintln(w, "public: anyone may reach it, without a key")
				}
				fmt.Fprintln(w, "addresses (through any node):")
				printAddresses(w, id, out.Addresses)
				fmt.Fprintf(w, "next: %s · %s · %s · %s\n", hint(fmt.Sprintf("service status %d", id)), hint(fmt.Sprintf("service logs %d", id)), hint(fmt.Sprintf("service topup %d AMOUNT", id)), hint(fmt.Sprintf("service stop %d", id)))
			})
			if saveErr != nil {
				return fmt.Errorf("service %d is deployed, but its access key could not be kept (copy it from above): %w", id, saveErr)
			}
			return err
		},
	}
	fromFlag(deploy, &from)
	over.flags(deploy, true)
	return deploy
}

func serviceQuoteCmd(e *env) *cobra.Command {
	var over serviceOverrides
	quote := &cobra.Command{
		Use:   "quote SPEC.yaml|- [--replicas N] [--budget AMOUNT]",
		Short: "What deploying a service would cost now: the providers that could take its replicas, the rate per hour, how long its budget lasts, or why it would wait",
		Args:  exactArgs("SPEC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := over.load(cmd, args[0])
			if err != nil {
				return err
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			spec := s.ServiceSpec()
			q, err := cl.QuoteService(cmd.Context(), &spec, uint64(s.Budget))
			if err != nil {
				return err
			}
			names := e.names()
			return e.print(q, func(w io.Writer) {
				fmt.Fprintf(w, "%d provider(s) could take a replica of %q now\n", q.Matching, s.Name)
				if q.Reason != "" {
					fmt.Fprintf(w, "it would wait: %s\n", q.Reason)
					if q.CheapestAsk > 0 {
						fmt.Fprintf(w, "the cheapest ask above its max_price_per_hour is %s/h\n", formatSync(q.CheapestAsk))
					}
				}
				if q.RatePerHour > 0 {
					placed := min(uint64(q.Matching), q.Replicas)
					fmt.Fprintf(w, "rate: %s/h for %d ready replica(s), the protocol fee included (the dearest at %s/h)\n", formatSync(q.RatePerHour), placed, formatSync(q.PricePerHour))
				}
				if q.Budget < q.MinBudget {
					fmt.Fprintf(w, "a budget of %s is too small to deploy it: at least %s (a minute of its replicas at max_price, the fee included)\n", formatSync(q.Budget), formatSync(q.MinBudget))
				} else if q.LastsSeconds > 0 {
					fmt.Fprintf(w, "a budget of %s lasts about %s at that rate; top it up with %s\n", formatSync(q.Budget), time.Duration(q.LastsSeconds)*time.Second, hint("service topup"))
				}
				for _, b := range q.Best {
					fmt.Fprintf(w, "  %s  %s/h  score %d\n", names.addr(b.Provider), formatSync(b.PricePerHour), b.Score)
				}
			})
		},
	}
	over.flags(quote, false)
	return quote
}

func serviceListCmd(e *env) *cobra.Command {
	var owner string
	var limit int
	list := &cobra.Command{
		Use:   "list [--owner KEY|ADDR]",
		Short: "List services, newest first: an owner's (every state), or everyone's active ones",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 1000 {
				return usageError{fmt.Errorf("--limit %d: want 1 to 1000", limit)}
			}
			var who *address.Address
			if owner != "" {
				a, err := e.resolveAddress(owner)
				if err != nil {
					return err
				}
				who = &a
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			l, err := cl.Services(cmd.Context(), who, limit)
			if err != nil {
				return err
			}
			if l.Services == nil {
				l.Services = []*ledger.Service{}
			}
			names := e.names()
			return e.print(l.Services, func(w io.Writer) {
				if len(l.Services) == 0 {
					fmt.Fprintln(w, "No services.")
					return
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tNAME\tOWNER\tSTATE\tREADY\tESCROW\tCOST\tREASON")
				for _, s := range l.Services {
					who := names.name(s.Owner)
					if who == "" {
						who = shortAddr(s.Owner)
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", s.ID, s.Spec.Name, who, s.State,
						readyCount(s), s.Spec.Replicas, formatSync(s.Escrow), formatSync(s.Cost+s.Fee), s.Reason)
				}
				tw.Flush()
			})
		},
	}
	list.Flags().StringVar(&owner, "owner", "", "list the services of this key or address, in every state (default: everyone's active ones)")
	list.Flags().IntVar(&limit, "limit", 100, "at most this many")
	return list
}

// readyCount is how many of s's replicas are routable.
func readyCount(s *ledger.Service) int {
	n := 0
	for _, r := range s.Replicas {
		if r.Ready && r.ReadyAt != 0 {
			n++
		}
	}
	return n
}

// ownerSend signs msg for service id with its owner's key: from, or the
// keyring's key of the owner. A key that does not own the service is
// refused here, naming the owner.
func (e *env) ownerSend(cmd *cobra.Command, from string, id uint64, what string, msg ledger.Msg) (*apiwire.TxResult, *ledger.Service, error) {
	svc, from, err := e.serviceOwner(cmd, from, id, what)
	if err != nil {
		return nil, svc, err
	}
	res, _, err := e.signAndSend(cmd, from, 0, msg)
	return res, svc, err
}

// serviceOwner reads service id and names the key that owns it: from,
// checked, or the keyring's key of its owner.
func (e *env) serviceOwner(cmd *cobra.Command, from string, id uint64, what string) (*ledger.Service, string, error) {
	cl, err := e.client()
	if err != nil {
		return nil, "", err
	}
	svc, err := cl.Service(cmd.Context(), id)
	if err != nil {
		return nil, "", err
	}
	names := e.names()
	if from == "" {
		if from = names.name(svc.Owner); from == "" {
			return svc, "", fmt.Errorf("service %d belongs to %s, whose key is not in %s/keyring: only its owner can %s", id, svc.Owner, e.home, what)
		}
		return svc, from, nil
	}
	kr, err := e.keyring()
	if err != nil {
		return svc, "", err
	}
	k, err := kr.Lookup(from)
	if err != nil {
		return svc, "", err
	}
	if k.Address != svc.Owner {
		return svc, "", fmt.Errorf("service %d belongs to %s, not to %s: only its owner can %s", id, names.addr(svc.Owner), names.addr(k.Address), what)
	}
	return svc, from, nil
}

// ownerFlagService adds --from KEY to a command on an existing service.
func ownerFlagService(cmd *cobra.Command, from *string) {
	cmd.Flags().StringVar(from, "from", "", "the service owner's key (default: the keyring's key of the service's owner)")
}

// serviceTxResult is the JSON of a command that sends one tx about a
// service: the tx's result and the service as it is after it.
type serviceTxResult struct {
	*apiwire.TxResult
	Service *ledger.Service `json:"service,omitempty"`
}

// afterTx prints a service tx's result, with the service as it is now.
func (e *env) afterTx(cmd *cobra.Command, res *apiwire.TxResult, id uint64, text func(w io.Writer, s *ledger.Service)) error {
	out := serviceTxResult{TxResult: res}
	if cl, err := e.client(); err == nil {
		out.Service, _ = cl.Service(cmd.Context(), id)
	}
	return e.print(out, func(w io.Writer) {
		if out.Service != nil {
			text(w, out.Service)
		}
		printTxResult(w, res)
	})
}

func serviceScaleCmd(e *env) *cobra.Command {
	var from string
	scale := &cobra.Command{
		Use:   "scale ID N [--from KEY]",
		Short: "Set how many replicas a service runs (1 to 16); new ones are placed, extra ones end",
		Args:  exactArgs("ID", "N"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseServiceID(args[0])
			if err != nil {
				return err
			}
			n, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil || n < 1 || n > ledger.MaxServiceReplicas {
				return usageError{fmt.Errorf("replicas %q: want 1 to %d", args[1], ledger.MaxServiceReplicas)}
			}
			res, _, err := e.ownerSend(cmd, from, id, "scale it", &ledger.MsgScaleService{ServiceID: id, Replicas: n})
			if err != nil {
				return err
			}
			return e.afterTx(cmd, res, id, func(w io.Writer, s *ledger.Service) {
				fmt.Fprintf(w, "service %d wants %d replica(s): %d placed, %d ready\n", id, s.Spec.Replicas, len(s.Replicas), readyCount(s))
			})
		},
	}
	ownerFlagService(scale, &from)
	return scale
}

func serviceTopUpCmd(e *env) *cobra.Command {
	var from string
	topup := &cobra.Command{
		Use:   "topup ID AMOUNT [--from KEY]",
		Short: "Add AMOUNT (e.g. 5sync, or usync) to a service's budget; anyone may pay, the refund goes to its owner",
		Args:  exactArgs("ID", "AMOUNT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseServiceID(args[0])
			if err != nil {
				return err
			}
			amt, err := parseAmount(args[1])
			if err != nil {
				return usageError{err}
			}
			res, _, err := e.signAndSend(cmd, from, 0, &ledger.MsgTopUpService{ServiceID: id, Amount: amt})
			if err != nil {
				return err
			}
			return e.afterTx(cmd, res, id, func(w io.Writer, s *ledger.Service) {
				fmt.Fprintf(w, "service %d topped up by %s: budget %s, escrow %s\n", id, formatAmount(amt), formatSync(s.Budget), formatSync(s.Escrow))
				if s.RunsOutAt != 0 {
					fmt.Fprintf(w, "at its current rate it runs out at %s\n", unixTime(s.RunsOutAt))
				}
			})
		},
	}
	fromFlag(topup, &from)
	return topup
}

func serviceStopCmd(e *env) *cobra.Command {
	var from string
	stop := &cobra.Command{
		Use:   "stop ID [--from KEY]",
		Short: "Stop a service: its replicas are paid to now and end, the rest of its escrow is refunded",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseServiceID(args[0])
			if err != nil {
				return err
			}
			res, _, err := e.ownerSend(cmd, from, id, "stop it", &ledger.MsgStopService{ServiceID: id})
			if err != nil {
				return err
			}
			return e.afterTx(cmd, res, id, func(w io.Writer, s *ledger.Service) {
				fmt.Fprintf(w, "service %d %s: paid to providers %s, fee %s, refunded %s\n", id, s.State, formatSync(s.Cost), formatSync(s.Fee), formatAmount(s.Refund))
			})
		},
	}
	ownerFlagService(stop, &from)
	return stop
}

func serviceEvictCmd(e *env) *cobra.Command {
	var from, reason string
	evict := &cobra.Command{
		Use:   "evict ID PROVIDER [--reason TEXT] [--from KEY]",
		Short: "End one replica of a service (its provider is paid to now and not used for it again); another is placed",
		Args:  exactArgs("ID", "PROVIDER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseServiceID(args[0])
			if err != nil {
				return err
			}
			prov, err := e.resolveAddress(args[1])
			if err != nil {
				return err
			}
			res, _, err := e.ownerSend(cmd, from, id, "evict its replicas", &ledger.MsgEvictReplica{ServiceID: id, Provider: prov, Reason: reason})
			if err != nil {
				return err
			}
			names := e.names()
			return e.afterTx(cmd, res, id, func(w io.Writer, s *ledger.Service) {
				fmt.Fprintf(w, "service %d: the replica on %s was evicted; %d of %d replica(s) placed\n", id, names.addr(prov), len(s.Replicas), s.Spec.Replicas)
			})
		},
	}
	ownerFlagService(evict, &from)
	evict.Flags().StringVar(&reason, "reason", "", "why (kept in the service's history)")
	return evict
}
