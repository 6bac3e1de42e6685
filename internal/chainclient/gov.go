package chainclient

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gpunet/gpunet/internal/apiwire"
)

// ParamTable returns every ledger parameter with its bounds and largest
// step per proposal (GET /v1/params/registry).
func (c *Client) ParamTable(ctx context.Context) (apiwire.ParamTable, error) {
	var out apiwire.ParamTable
	_, err := c.do(ctx, http.MethodGet, "/v1/params/registry", nil, &out)
	return out, err
}

// Proposals returns the newest governance proposals, at most limit (up
// to apiwire.MaxPageLimit).
func (c *Client) Proposals(ctx context.Context, limit int) (*apiwire.ProposalList, error) {
	var out apiwire.ProposalList
	_, err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v1/gov/proposals?limit=%d", limit), nil, &out)
	return &out, err
}

// Proposal returns proposal id; IsNotFound(err) when there is none.
func (c *Client) Proposal(ctx context.Context, id uint64) (*apiwire.ProposalView, error) {
	var out apiwire.ProposalView
	_, err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v1/gov/proposals/%d", id), nil, &out)
	return &out, err
}
