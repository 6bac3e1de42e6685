package apiserver

import (
	"github.com/gpunet/gpunet/internal/jobtext"
	"github.com/gpunet/gpunet/internal/ledger"
)

// The ledger records why as codes and numbers (ledger.Wait); the API
// serves both those and, in the reason fields clients have always read,
// the sentences internal/jobtext renders from them. The records served
// are each a fresh copy decoded for this request, so they are filled in
// place.

// renderJob fills j's sentence fields: reason, audit_dropped,
// checkpoint_note and released.
func renderJob(j *ledger.Job) {
	j.Reason = jobtext.Job(j)
	j.AuditDropped = jobtext.Dropped(j)
	j.CheckpointNote = jobtext.CheckpointNote(j)
	j.Released = jobtext.Released(j)
}

func renderJobs(js []*ledger.Job) {
	for _, j := range js {
		renderJob(j)
	}
}

// renderService fills s's reason and each ended replica's why.
func renderService(s *ledger.Service) {
	s.Reason = jobtext.Service(s)
	for i := range s.Ended {
		s.Ended[i].Why = jobtext.ReplicaEnd(&s.Ended[i])
	}
}

func renderServices(ss []*ledger.Service) {
	for _, s := range ss {
		renderService(s)
	}
}

// renderProposal fills p's reason.
func renderProposal(p *ledger.Proposal) { p.Reason = jobtext.Proposal(p) }

// renderQuote fills a job quote's reason from its miss (for spec, the
// quoted job).
func renderQuote(q *ledger.Quote, spec *ledger.JobSpec) {
	if q.Miss != nil {
		q.Reason = jobtext.QuoteMiss(q.Miss, spec)
	}
}

// renderServiceQuote fills a service quote's reason from its miss (for
// spec, the quoted service).
func renderServiceQuote(q *ledger.ServiceQuote, spec *ledger.ServiceSpec) {
	if q.Miss != nil {
		q.Reason = jobtext.ServiceQuoteMiss(q.Miss, spec)
	}
}

// renderProvider fills the reason of p's slash events and the sentence of
// its latest failed hardware challenge.
func renderProvider(p *ledger.Provider) {
	for i := range p.SlashEvents {
		p.SlashEvents[i].Reason = jobtext.Slash(&p.SlashEvents[i])
	}
	if f := p.Challenges.LastFail; f != nil {
		p.Challenges.LastFailure = jobtext.ChallengeFailure(f)
	}
}
