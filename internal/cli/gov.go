package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// govCmd is `gpunet gov`: propose, deposit, vote, list and show
// governance proposals (docs/ledger.md, Governance).
func govCmd(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "gov",
		Short: "On-chain governance: propose parameter changes, treasury spends and texts; deposit; vote",
		Long: `A proposal gathers its minimum deposit in its deposit period, then is open to
votes (yes, no, abstain, veto) weighted by bonded stake (validator bond,
provider stake, and stake delegated to them: a delegation votes as its
delegator votes, else as its validator or provider votes) for its voting
period. It passes with a quorum of the bonded
stake and more yes than the threshold of yes, no and veto; too much veto, or a
deposit period that ends first, burns its deposits; otherwise they come back.
A passed parameter change applies from the block after the voting period.
See the periods and thresholds with 'gpunet query params'.`,
	}
	c.AddCommand(govProposeCmd(e), govDepositCmd(e), govVoteCmd(e), govListCmd(e), govShowCmd(e))
	return c
}

// govProposeCmd is `gov propose param|spend|text|attest-roots`.
func govProposeCmd(e *env) *cobra.Command {
	var from, deposit, title, body string
	propose := &cobra.Command{Use: "propose", Short: "Submit a proposal (param, spend, text or attest-roots)"}
	submit := func(cmd *cobra.Command, m *ledger.MsgSubmitProposal) error {
		if title != "" {
			m.Title = title
		}
		if body != "" {
			m.Body = body
		}
		if len(m.Title) > 140 {
			m.Title = m.Title[:137] + "..." // the ledger's limit; the changes are all in the proposal
		}
		cl, err := e.client()
		if err != nil {
			return err
		}
		if deposit == "" {
			// Default: what takes it straight to its voting period.
			list, err := cl.Proposals(cmd.Context(), 1)
			if err != nil {
				return err
			}
			m.Deposit = ledger.Amount(list.NextMinDeposit)
		} else {
			amt, err := parseAmount(deposit)
			if err != nil {
				return usageError{fmt.Errorf("--deposit: %w", err)}
			}
			m.Deposit = ledger.Amount(amt)
		}
		res, _, err := e.signAndSend(cmd, from, 0, m)
		if err != nil {
			return err
		}
		out := proposeResult{TxResult: res, Proposal: eventUint(res.Events, "proposal_submitted", "proposal"), Status: ledger.ProposalDeposit}
		if eventUint(res.Events, "proposal_voting", "proposal") != 0 {
			out.Status = ledger.ProposalVoting
		}
		return e.print(out, func(w io.Writer) {
			fmt.Fprintf(w, "proposal %d submitted (%s), deposit %s: %s\n", out.Proposal, m.Kind, formatAmount(uint64(m.Deposit)), out.Status)
			printTxResult(w, res)
		})
	}
	param := &cobra.Command{
		Use:   "param KEY=VALUE… [--deposit AMOUNT] --from KEY",
		Short: "Propose parameter changes (each within its bounds and largest step: see `gpunet query params`)",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{fmt.Errorf("%s needs at least one KEY=VALUE", cmd.CommandPath())}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var changes []ledger.ParamChange
			for _, a := range args {
				k, v, ok := strings.Cut(a, "=")
				n, err := strconv.ParseUint(v, 10, 64)
				if !ok || k == "" || err != nil {
					return usageError{fmt.Errorf("%q: want KEY=VALUE with VALUE a non-negative integer, e.g. min_fee=500", a)}
				}
				if _, known := ledger.LookupParam(k); !known {
					return usageError{fmt.Errorf("%q: no parameter %q (see `%s`)", a, k, hint("query params"))}
				}
				changes = append(changes, ledger.ParamChange{Key: k, Value: n})
			}
			names := make([]string, len(args))
			copy(names, args)
			return submit(cmd, &ledger.MsgSubmitProposal{Kind: ledger.ProposalParam, Title: "set " + strings.Join(names, " "), Changes: changes})
		},
	}
	spend := &cobra.Command{
		Use:   "spend TO AMOUNT [--deposit AMOUNT] --from KEY",
		Short: "Propose paying AMOUNT from the treasury to TO (an address or a key's name)",
		Args:  exactArgs("TO", "AMOUNT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			to, err := e.resolveAddress(args[0])
			if err != nil {
				return err
			}
			amt, err := parseAmount(args[1])
			if err != nil {
				return usageError{err}
			}
			return submit(cmd, &ledger.MsgSubmitProposal{Kind: ledger.ProposalSpend, Title: fmt.Sprintf("pay %s to %s", formatAmount(amt), to), To: &to, Amount: ledger.Amount(amt)})
		},
	}
	text := &cobra.Command{
		Use:   "text TITLE [--body TEXT] [--deposit AMOUNT] --from KEY",
		Short: "Propose a text: a decision on record that changes nothing by itself",
		Args:  exactArgs("TITLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return submit(cmd, &ledger.MsgSubmitProposal{Kind: ledger.ProposalText, Title: args[0]})
		},
	}
	var addRoots, removeRoots []string
	roots := &cobra.Command{
		Use:   "attest-roots [--add SHA256]… [--remove SHA256]… [--deposit AMOUNT] --from KEY",
		Short: "Propose adding or removing TEE roots of trust: the SHA-256 (hex) of DER root certificates (see docs/confidential.md)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(addRoots)+len(removeRoots) == 0 {
				return usageError{fmt.Errorf("%s needs --add or --remove with a root's SHA-256", cmd.CommandPath())}
			}
			for _, l := range []struct {
				flag  string
				roots []string
			}{{"--add", addRoots}, {"--remove", removeRoots}} {
				for _, r := range l.roots {
					if b, err := hex.DecodeString(r); err != nil || len(b) != sha256.Size {
						return usageError{fmt.Errorf("%s %q: want the SHA-256 of a DER root certificate, 64 hex digits (sha256sum root.der)", l.flag, r)}
					}
				}
			}
			lower := func(l []string) []string {
				out := make([]string, len(l))
				for i, r := range l {
					out[i] = strings.ToLower(r)
				}
				return out
			}
			var what []string
			if len(addRoots) > 0 {
				what = append(what, fmt.Sprintf("add %d", len(addRoots)))
			}
			if len(removeRoots) > 0 {
				what = append(what, fmt.Sprintf("remove %d", len(removeRoots)))
			}
			return submit(cmd, &ledger.MsgSubmitProposal{Kind: ledger.ProposalAttestRoots, Title: strings.Join(what, ", ") + " TEE root(s) of trust",
				AddRoots: lower(addRoots), RemoveRoots: lower(removeRoots)})
		},
	}
	roots.Flags().StringArrayVar(&addRoots, "add", nil, "SHA-256 (hex) of a DER root certificate to trust (repeatable)")
	roots.Flags().StringArrayVar(&removeRoots, "remove", nil, "SHA-256 (hex) of a root to stop trusting (repeatable)")
	for _, sub := range []*cobra.Command{param, spend, text, roots} {
		sub.Flags().StringVar(&from, "from", "", "the proposer's key (default: the only key in the keyring)")
		sub.Flags().StringVar(&deposit, "deposit", "", "initial deposit (default: the minimum deposit now, which starts the voting period at once)")
		sub.Flags().StringVar(&body, "body", "", "the proposal's text")
		if sub != text {
			sub.Flags().StringVar(&title, "title", "", "the proposal's title (default: what it does)")
		}
		propose.AddCommand(sub)
	}
	return propose
}

func govDepositCmd(e *env) *cobra.Command {
	var from string
	depositCmd := &cobra.Command{
		Use:   "deposit ID AMOUNT --from KEY",
		Short: "Add AMOUNT to proposal ID's deposit (in its deposit period)",
		Args:  exactArgs("ID", "AMOUNT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := proposalID(args[0])
			if err != nil {
				return err
			}
			amt, err := parseAmount(args[1])
			if err != nil {
				return usageError{err}
			}
			return e.sendMsg(cmd, from, 0, &ledger.MsgDeposit{ProposalID: id, Amount: ledger.Amount(amt)})
		},
	}
	depositCmd.Flags().StringVar(&from, "from", "", "the signing key (default: the only key in the keyring)")
	return depositCmd
}

func govVoteCmd(e *env) *cobra.Command {
	var from string
	voteCmd := &cobra.Command{
		Use:   "vote ID yes|no|abstain|veto --from KEY",
		Short: "Vote on proposal ID (in its voting period; a later vote replaces an earlier one)",
		Args:  exactArgs("ID", "OPTION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := proposalID(args[0])
			if err != nil {
				return err
			}
			if !slices.Contains([]string{ledger.VoteYes, ledger.VoteNo, ledger.VoteAbstain, ledger.VoteVeto}, args[1]) {
				return usageError{fmt.Errorf("vote %q: want yes, no, abstain or veto", args[1])}
			}
			return e.sendMsg(cmd, from, 0, &ledger.MsgVote{ProposalID: id, Option: args[1]})
		},
	}
	voteCmd.Flags().StringVar(&from, "from", "", "the signing key (default: the only key in the keyring)")
	return voteCmd
}

func govListCmd(e *env) *cobra.Command {
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List proposals, newest first, with their status and tally",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			l, err := cl.Proposals(cmd.Context(), limit)
			if err != nil {
				return err
			}
			return e.print(l, func(w io.Writer) { printProposals(w, l) })
		},
	}
	list.Flags().IntVar(&limit, "limit", 50, "at most this many")
	return list
}

func govShowCmd(e *env) *cobra.Command {
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a proposal: what it does, its periods, deposits and tally",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := proposalID(args[0])
			if err != nil {
				return err
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			p, err := cl.Proposal(cmd.Context(), id)
			if err != nil {
				return err
			}
			names := e.names()
			return e.print(p, func(w io.Writer) { printProposal(w, p, names) })
		},
	}
	return show
}

// proposeResult is `gov propose … -o json`: the tx's result, the new
// proposal's id and its status (deposit or voting).
type proposeResult struct {
	*apiwire.TxResult
	Proposal uint64 `json:"proposal"`
	Status   string `json:"status"`
}

func proposalID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, usageError{fmt.Errorf("proposal id %q: want a positive integer (see `%s`)", s, hint("gov list"))}
	}
	return id, nil
}

// eventUint reads an integer attribute of the first event of a type.
func eventUint(evs []ledger.Event, typ, key string) uint64 {
	for _, ev := range evs {
		if ev.Type != typ {
			continue
		}
		for _, a := range ev.Attrs {
			if a.Key == key {
				n, _ := strconv.ParseUint(a.Value, 10, 64)
				return n
			}
		}
	}
	return 0
}

func printProposals(w io.Writer, l *apiwire.ProposalList) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\tKIND\tSTATUS\tDEPOSIT\tENDS\tYES/NO/ABSTAIN/VETO\tTITLE\n")
	for _, v := range l.Proposals {
		t := v.TallyNow
		if t == nil {
			t = v.Tally
		}
		tally, ends := "-", "-"
		if t != nil {
			tally = fmt.Sprintf("%s/%s/%s/%s", formatAmount(t.Yes), formatAmount(t.No), formatAmount(t.Abstain), formatAmount(t.Veto))
		}
		switch v.Status {
		case ledger.ProposalDeposit:
			ends = fmt.Sprint(v.DepositEnd)
		case ledger.ProposalVoting:
			ends = fmt.Sprint(v.VotingEnd)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s/%s\t%s\t%s\t%s\n", v.ID, v.Kind, v.Status, formatAmount(v.Deposit), formatAmount(v.MinDeposit), ends, tally, v.Title)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d active; a new proposal needs a deposit of %s; bonded stake %s; height %d\n", l.Active, formatAmount(l.NextMinDeposit), formatAmount(l.Bonded), l.Height)
}

func printProposal(w io.Writer, v *apiwire.ProposalView, names keyNames) {
	fmt.Fprintf(w, "proposal %d: %s\n", v.ID, v.Title)
	fmt.Fprintf(w, "kind:       %s\n", v.Kind)
	for _, c := range v.Changes {
		fmt.Fprintf(w, "  set %s = %d\n", c.Key, c.Value)
	}
	if v.To != nil {
		fmt.Fprintf(w, "  pay %s from the treasury to %s\n", formatAmount(v.Amount), names.addr(*v.To))
	}
	if v.Body != "" {
		fmt.Fprintf(w, "body:       %s\n", v.Body)
	}
	fmt.Fprintf(w, "proposer:   %s\n", names.addr(v.Proposer))
	fmt.Fprintf(w, "status:     %s\n", v.Status)
	fmt.Fprintf(w, "deposit:    %s of %s (deposit period to height %d)\n", formatAmount(v.Deposit), formatAmount(v.MinDeposit), v.DepositEnd)
	if v.VotingEnd > 0 {
		fmt.Fprintf(w, "voting:     heights %d to %d, %d voters\n", v.VotingStart, v.VotingEnd, v.Voters)
	}
	printTally := func(label string, t *ledger.Tally) {
		fmt.Fprintf(w, "%s yes %s, no %s, abstain %s, veto %s of %s bonded\n", label, formatAmount(t.Yes), formatAmount(t.No), formatAmount(t.Abstain), formatAmount(t.Veto), formatAmount(t.Bonded))
	}
	if v.TallyNow != nil {
		printTally("tally now: ", v.TallyNow)
	}
	if v.Tally != nil {
		printTally("tally:     ", v.Tally)
	}
	if v.DecidedHeight > 0 {
		fmt.Fprintf(w, "decided:    at the start of block %d: %s\n", v.DecidedHeight, v.Reason)
	}
}

// queryParamsCmd is `gpunet query params`: every parameter with its value,
// bounds and largest step per proposal.
func queryParamsCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "params",
		Short: "List every ledger parameter: value, bounds, largest change one proposal may make, meaning",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			table, err := cl.ParamTable(cmd.Context())
			if err != nil {
				return err
			}
			return e.print(table, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintf(tw, "PARAMETER\tVALUE\tMIN\tMAX\tMAX STEP\tKIND\tDESCRIPTION\n")
				for _, s := range ledger.ParamRegistry() { // registry order
					p, ok := table[s.Name]
					if !ok {
						continue
					}
					fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", s.Name, p.Value, p.Min, p.Max, p.MaxStep, p.Kind, p.Description)
				}
				tw.Flush()
			})
		},
	}
}
