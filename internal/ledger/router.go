package ledger

import "fmt"

// The router: which handler applies each message. Handlers live in their
// area's file (doc.go lists them).

// eventsWanted says whether a tx's events are wanted: a block's are (its
// results carry them), a mempool check's are not (TxChecker drops them).
// A handler may leave them out when they are not; the state it writes and
// the error it returns must be the same either way.
type eventsWanted bool

const (
	withEvents eventsWanted = true
	noEvents   eventsWanted = false
)

// execute applies a tx's message. Handlers live beside their state area.
// With noEvents, the transfer (the most common tx by far) builds none;
// other messages build theirs and the caller drops them.
func (l *Ledger) execute(o *Overlay, tx *Tx, params Params, info BlockInfo, ev eventsWanted) ([]Event, error) {
	from := tx.Sender()
	switch m := tx.Msg.(type) {
	case *MsgSend:
		return execSend(o, from, m, ev)
	case *MsgRegisterProvider:
		return execRegisterProvider(o, from, m, info)
	case *MsgUpdateProvider:
		return execUpdateProvider(o, from, m, params, info)
	case *MsgSetProviderStatus:
		return execSetProviderStatus(o, from, m, params, info)
	case *MsgStake:
		return execStake(o, from, m)
	case *MsgUnstake:
		return execUnstake(o, from, m, params, info)
	case *MsgLivenessProof:
		return execLivenessProof(o, from, m, info)
	case *MsgSubmitJob:
		return execSubmitJob(o, from, m, params, info)
	case *MsgGrantKey:
		return execGrantKey(o, from, m, params, info)
	case *MsgStartJob:
		return execStartJob(o, from, m, params, info)
	case *MsgCommitResult:
		return execCommitResult(o, from, m, params, info)
	case *MsgCancelJob:
		return execCancelJob(o, from, m, params, info)
	case *MsgRevealResult:
		return execRevealResult(o, from, m, params, info)
	case *MsgChallengeCommit:
		return execChallengeCommit(o, from, m, info)
	case *MsgChallengeOpen:
		return execChallengeOpen(o, from, m, params, info)
	case *MsgRequestKeyHandover:
		return execRequestKeyHandover(o, from, m, params, info)
	case *MsgHandOverKey:
		return execHandOverKey(o, from, m, params, info)
	case *MsgDisputeKeyHandover:
		return execDisputeKeyHandover(o, from, m, params, info)
	case *MsgCreateValidator:
		return execCreateValidator(o, from, m, params, info)
	case *MsgUnjail:
		return execUnjail(o, from, params, info)
	case *MsgValidatorBond:
		return execValidatorBond(o, from, m)
	case *MsgValidatorUnbond:
		return execValidatorUnbond(o, from, m, params, info)
	case *MsgReleaseJob:
		return execReleaseJob(o, from, m, params, info)
	case *MsgCommitCheckpoint:
		return execCommitCheckpoint(o, from, m, params, info)
	case *MsgGangMember:
		return execGangMember(o, from, m)
	case *MsgSubmitProposal:
		return execSubmitProposal(o, from, m, params, info)
	case *MsgDeposit:
		return execDeposit(o, from, m, params, info)
	case *MsgVote:
		return execVote(o, from, m)
	case *MsgClaimRewards:
		return execClaimRewards(o, from, m, params, info)
	case *MsgDelegate:
		return execDelegate(o, from, m, params)
	case *MsgUndelegate:
		return execUndelegate(o, from, m, params, info)
	case *MsgRedelegate:
		return execRedelegate(o, from, m, params, info)
	case *MsgSetCommission:
		return execSetCommission(o, from, m, params, info)
	case *MsgDeployService:
		return execDeployService(o, from, m, params, info)
	case *MsgTopUpService:
		return execTopUpService(o, from, m, params, info)
	case *MsgScaleService:
		return execScaleService(o, from, m, params, info)
	case *MsgStopService:
		return execStopService(o, from, m, params, info)
	case *MsgSetServiceAccess:
		return execSetServiceAccess(o, from, m)
	case *MsgServiceHeartbeat:
		return execServiceHeartbeat(o, from, m, params, info)
	case *MsgReleaseReplica:
		return execReleaseReplica(o, from, m, params, info)
	case *MsgEvictReplica:
		return execEvictReplica(o, from, m, params, info)
	case *MsgRequestAttestation:
		return execRequestAttestation(o, from, info)
	case *MsgCommitJudgment:
		return execCommitJudgment(o, from, m, params, info)
	case *MsgRevealJudgment:
		return execRevealJudgment(o, from, m, params, info)
	case *MsgServiceDispute:
		return execServiceDispute(o, tx.ChainID, m, params, info)
	case *MsgAttest:
		return l.execAttest(o, from, m, params, info)
	case *MsgAttestServed:
		return execAttestServed(o, tx.PubKey, m, params, info)
	case *MsgReportReplicaDown:
		return execReportReplicaDown(o, tx.PubKey, m, params, info)
	}
	return nil, fmt.Errorf("no handler for %s: %w", tx.Msg.Type(), ErrUnknownMsgType)
}
